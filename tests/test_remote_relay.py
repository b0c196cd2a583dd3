"""The hop between the Ray gateway and its replicas (`remote.relay`), without Ray: a fake `Backend` stands in
for the replica's `Service`, and the gateway's `RelayBackend` reads its `answer` stream back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from dice_lsp.errors import DiceError
from dice_lsp.jobs import MAX_BATCH_ROWS
from dice_lsp.jobs.model_host import Ticket
from dice_lsp.remote.limits import ConnectionLimits, RequestLimits
from dice_lsp.remote.protocol import RemoteError
from dice_lsp.remote.relay import (
    Answered,
    Event,
    Failed,
    GatewayArgs,
    Progressed,
    RelayBackend,
    ReplicaArgs,
    answer,
    app_args,
)
from dice_lsp.settings import Settings


class FakeService:
    """A `Backend` that says two progress lines, then answers by method; `hang` waits until cancelled."""

    def __init__(self) -> None:
        self.tickets: list[Ticket] = []
        self.cancelled = asyncio.Event()

    async def call(self, method: str, params: dict[str, Any], ticket: Ticket, progress: Any) -> Any:
        self.tickets.append(ticket)
        progress(f"{method}: started")
        progress(f"{method}: half way")
        if method == "refused":
            raise RemoteError("bad_params", "refused: candidates 99 exceeds the server's limit of 16")
        if method == "broken":
            raise DiceError("nvcc not found")
        if method == "hang":
            try:
                await asyncio.Event().wait()
            finally:
                self.cancelled.set()
        return {"method": method, "params": params}


class Stream:
    """Ray's response generator as the gateway sees it: the events, and `cancel`."""

    def __init__(self, events: AsyncIterator[Event]) -> None:
        self.events = events
        self.cancelled = False

    def __aiter__(self) -> AsyncIterator[Event]:
        return self.events

    def cancel(self) -> None:
        self.cancelled = True


async def events_of(method: str, params: dict[str, Any]) -> list[Event]:
    return [event async for event in answer(FakeService(), method, params)]


def test_a_replica_streams_progress_then_the_result() -> None:
    assert asyncio.run(events_of("check", {"text": "x"})) == [
        Progressed("check: started"), Progressed("check: half way"),
        Answered({"method": "check", "params": {"text": "x"}})]


def test_a_replica_streams_the_error_with_its_code() -> None:
    assert asyncio.run(events_of("refused", {}))[-1] == Failed(
        "bad_params", "refused: candidates 99 exceeds the server's limit of 16")
    assert asyncio.run(events_of("broken", {}))[-1] == Failed("failed", "nvcc not found")


def gateway_call(method: str, params: dict[str, Any]) -> tuple[Any, list[str]]:
    said: list[str] = []
    relay = RelayBackend(lambda m, p: Stream(answer(FakeService(), m, p)))
    return asyncio.run(relay.call(method, params, Ticket(), said.append)), said


def test_the_gateway_reads_the_stream_back_as_the_service_would_answer() -> None:
    result, said = gateway_call("bench", {"text": "k", "trials": 3})
    assert result == {"method": "bench", "params": {"text": "k", "trials": 3}}
    assert said == ["bench: started", "bench: half way"]


def test_the_gateway_raises_the_replicas_error_with_its_code() -> None:
    with pytest.raises(RemoteError, match="exceeds the server's limit of 16") as refused:
        gateway_call("refused", {})
    assert refused.value.code == "bad_params"
    with pytest.raises(RemoteError, match=r"^nvcc not found$") as broken:
        gateway_call("broken", {})
    assert broken.value.code == "failed"


def test_a_stream_without_an_answer_is_a_failed_request() -> None:
    async def only_progress() -> AsyncIterator[Event]:
        yield Progressed("loading")

    relay = RelayBackend(lambda _m, _p: Stream(only_progress()))
    with pytest.raises(RemoteError, match="complete: the replica ended without an answer") as ended:
        asyncio.run(relay.call("complete", {}, Ticket(), lambda _line: None))
    assert ended.value.code == "failed"


def test_cancelling_the_gateways_call_cancels_the_stream_and_the_replicas_work() -> None:
    service = FakeService()
    streams: list[Stream] = []

    def ask(method: str, params: dict[str, Any]) -> Stream:
        streams.append(Stream(answer(service, method, params)))
        return streams[-1]

    async def scenario() -> Ticket:
        ticket = Ticket()
        said: list[str] = []
        call = asyncio.ensure_future(RelayBackend(ask).call("hang", {}, ticket, said.append))
        while len(said) < 2:
            await asyncio.sleep(0)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await streams[0].events.aclose()  # type: ignore[attr-defined]  # what Ray does on the replica
        await asyncio.wait_for(service.cancelled.wait(), 1.0)
        return ticket

    gateway_ticket = asyncio.run(scenario())
    assert gateway_ticket() and streams[0].cancelled
    assert [ticket() for ticket in service.tickets] == [True]


def test_the_app_args_split_between_replicas_and_gateway() -> None:
    replica, gateway = app_args({"model": "/models/dice", "device": "cuda", "max_candidates": 8, "max_trials": 5,
                                 "port": 7999, "token_file": "/etc/dice/token", "handshake_timeout": 2.5})
    assert replica == ReplicaArgs(Settings(model="/models/dice", device="cuda"), MAX_BATCH_ROWS, False,
                                  RequestLimits(max_candidates=8, max_trials=5))
    assert gateway == GatewayArgs(port=7999, token_file="/etc/dice/token",
                                  limits=ConnectionLimits(handshake_timeout=2.5))
    assert app_args({}) == (ReplicaArgs(), GatewayArgs())


def test_the_app_args_refuse_unknown_names_and_bad_limits() -> None:
    with pytest.raises(DiceError, match=r"^unknown args in the serve config: max_candidate, prot$"):
        app_args({"max_candidate": 8, "prot": 1})
    with pytest.raises(DiceError, match="max_candidates: must be a positive integer, not 0"):
        app_args({"max_candidates": 0})
    with pytest.raises(DiceError, match="backoff_max must not be below backoff"):
        app_args({"backoff": 10.0, "backoff_max": 1.0})
    with pytest.raises(DiceError, match=r"dice\.trustRemoteCode: must be"):
        app_args({"trust_remote_code": "yes"})
