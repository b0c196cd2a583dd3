"""The team server, black box: a real `dice-lsp serve` process, the embedded model, real sockets."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dice_lsp.address import parse_address
from dice_lsp.complete import complete_at, front_end_for
from dice_lsp.engine import load_model
from dice_lsp.remote.client import RemoteClient
from dice_lsp.remote.protocol import MAX_FRAME, RemoteError
from dice_lsp.settings import Settings
from dice_lsp.textdoc import Position
from dice_lsp.toolchain.flags import CompileFlags

from .cli_runs import cli_here, cli_runs
from .lsp_client import LOOP_HEADER
from .remote_server import Raw, free_port, port_of, serving, token_file
from .remote_server import ask as ask_once

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SOURCE = (EXAMPLES / "vector_add.cu").read_text()
TOKEN = "team-secret"
LINE = Settings(max_canvas=24, min_confidence=0.0).per_request()  # one-line regions of one shape; checked fills shown
LONG = {"prefix": "__global__ void k(float* x) {\n", "max_tokens": 256, "settings": {"steps": 64}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    folder = tmp_path_factory.mktemp("serve")
    tokens = token_file(folder, TOKEN)
    with serving("--port", "0", "--token-file", str(tokens), "--max-pending", "16", token=TOKEN) as (url, _):
        yield url, tokens


async def ask(url: str, method: str, params: dict[str, Any] | None = None, token: str | None = TOKEN) -> Any:
    return await ask_once(url, method, params, token)


def completion_of(url: str, text: str = SOURCE, line: int = 7, character: int = 4) -> Any:
    return asyncio.run(ask(url, "complete", {"text": text, "line": line, "character": character, "settings": LINE}))


def test_a_remote_completion_is_the_local_one(server: tuple[str, Path]) -> None:
    url, _ = server
    settings = Settings(max_canvas=24, steps=4, min_confidence=0.0)  # dice-tiny's checked fill, whatever its P
    remote = asyncio.run(ask(url, "complete", {"text": LOOP_HEADER, "line": 2, "character": 29,
                                               "settings": settings.per_request()}))
    # the server's clang check reads the text with its own headers and the request's defines, as here; the
    # editor's clang runs have a time budget (a busy machine's run that outlasts it cannot tell: None), so the
    # local one here is patient and the server's verdict is either the same or "cannot tell"
    front_end = front_end_for(LOOP_HEADER, None, CompileFlags(), settings, patient=True)
    local = complete_at(load_model(None), LOOP_HEADER, Position(2, 29), settings, front_end=front_end)
    assert local.texts and [item["text"] for item in remote["items"]] == local.texts
    local_checks = [c.to_json() for c in local.checks or []]
    assert [c["types"] for c in local_checks] == [True] * len(local_checks), "clang accepts dice-tiny's fills"
    for served, here in zip(remote["items"], local_checks, strict=True):
        if served["checks"]["types"] is None:  # clang ran out of time there: parse, cheap names and nvcc agree
            assert (served["checks"]["parses"], served["checks"]["compiles"]) == (here["parses"], here["compiles"])
        else:
            assert served["checks"] == here
    assert remote["items"][0]["range"]["start"] == {"line": 2, "character": 29}
    assert remote["model"] == "dice-tiny" and remote["hole"] == "line"


def test_status_says_what_is_served(server: tuple[str, Path]) -> None:
    status = asyncio.run(ask(server[0], "status"))
    assert status["state"] == "ready" and status["model"] == "dice-tiny"
    assert {"version", "in_flight", "queued", "served", "fills", "fill_batches", "fill_steps",
            "step_rows"} <= status.keys()


@pytest.mark.parametrize("offered", [None, "wrong"])
def test_a_missing_or_wrong_token_is_refused_and_the_connection_closed(server: tuple[str, Path],
                                                                        offered: str | None) -> None:
    with pytest.raises(RemoteError) as refused:
        asyncio.run(ask(server[0], "status", token=offered))
    assert refused.value.code == "unauthorized"
    raw = Raw(server[0])
    raw.send({"id": 1, "method": "status", "params": {}, **({"token": offered} if offered else {})})
    reply = raw.receive()
    assert reply is not None and reply["error"]["code"] == "unauthorized"
    assert raw.receive() is None, "the connection is closed"


def test_a_rotated_token_file_admits_the_new_token_only(server: tuple[str, Path]) -> None:
    url, tokens = server
    stamp = tokens.stat().st_mtime
    tokens.write_text("rotated-secret\n")
    os.utime(tokens, (stamp + 5, stamp + 5))  # a new modification time, however coarse the file system's clock
    try:
        with pytest.raises(RemoteError, match="wrong token"):
            asyncio.run(ask(url, "status"))
        assert asyncio.run(ask(url, "status", token="rotated-secret"))["state"] == "ready"
    finally:
        tokens.write_text(TOKEN + "\n")
        os.utime(tokens, (stamp + 10, stamp + 10))
    assert asyncio.run(ask(url, "status"))["state"] == "ready"


def test_cancel_stops_a_running_request_and_the_server_goes_on(server: tuple[str, Path]) -> None:
    raw = Raw(server[0])
    raw.send({"id": 1, "method": "fill", "params": LONG, "token": TOKEN})
    raw.send({"id": 2, "method": "cancel", "params": {"id": 1}})
    replies = {reply["id"]: reply for reply in (raw.receive(), raw.receive()) if reply is not None}
    assert replies[2]["result"] == {"cancelled": True}
    assert replies[1]["error"]["code"] == "cancelled"
    raw.send({"id": 3, "method": "status", "params": {}})
    assert (reply := raw.receive()) is not None and reply["result"]["state"] == "ready"
    raw.close()


def test_a_cancelled_client_task_cancels_its_request(server: tuple[str, Path]) -> None:
    async def scenario() -> dict[str, Any]:
        client = RemoteClient(parse_address(server[0]), lambda: TOKEN)
        long = asyncio.create_task(client.call("fill", LONG))
        while (await client.call("status"))["in_flight"] == 0:
            await asyncio.sleep(0.05)
        long.cancel()
        while (status := await client.call("status"))["in_flight"] != 0:  # the server let go of it
            await asyncio.sleep(0.05)
        await client.close()
        return dict(status)

    assert asyncio.run(scenario())["state"] == "ready"


@pytest.mark.parametrize(("frame", "code"), [
    (struct.pack(">I", 3) + b"\xc1\xc1\xc1", "malformed"),  # 0xc1 is never valid msgpack
    (struct.pack(">I", MAX_FRAME + 1), "too_large"),  # refused from the header alone, before any body
    (struct.pack(">I", 1) + b"\x05", "malformed"),  # msgpack, but not a map
])
def test_a_broken_frame_gets_an_error_and_a_closed_connection(server: tuple[str, Path], frame: bytes,
                                                              code: str) -> None:
    raw = Raw(server[0])
    raw.sock.sendall(frame)
    reply = raw.receive()
    assert reply is not None and reply["error"]["code"] == code
    assert raw.receive() is None
    assert asyncio.run(ask(server[0], "status"))["state"] == "ready", "the server survived"


def test_an_unknown_method_is_an_error_but_the_connection_stays(server: tuple[str, Path]) -> None:
    raw = Raw(server[0])
    raw.send({"id": 1, "method": "format_disk", "params": {}, "token": TOKEN})
    assert (reply := raw.receive()) is not None and reply["error"]["code"] == "unknown_method"
    raw.send({"id": 2, "method": "status", "params": {}})
    assert (reply := raw.receive()) is not None and reply["result"]["state"] == "ready"
    raw.close()


def test_bad_params_are_named(server: tuple[str, Path]) -> None:
    for params, expected in [({"line": 1, "character": 0}, "text"),
                             ({"text": "x", "path": "../../etc/passwd"}, "relative path"),
                             ({"text": "x", "settings": {"model": "/elsewhere"}}, "chosen by the server")]:
        with pytest.raises(RemoteError, match=expected) as refused:
            asyncio.run(ask(server[0], "complete" if "line" in params else "check", params))
        assert refused.value.code == "bad_params"


@pytest.fixture(scope="module")
def fp32_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A server in fp32, where a fill is promised to be the same batched and alone (bf16 rounds differently
    at other positions and batch shapes: bench/batch_agreement.py measures by how much)."""
    tokens = token_file(tmp_path_factory.mktemp("serve32"), TOKEN)
    with serving("--port", "0", "--token-file", str(tokens), "--dtype", "float32", token=TOKEN) as (url, _):
        yield url, tokens


def _clang_timed(answers: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """The items with clang's type verdict left out: it is given only when clang answers within its bound, which four
    completions checked at once on two cores may pass (`types: None`); every other field must be equal."""
    return [[{**item, "checks": {k: v for k, v in item["checks"].items() if k != "types"}} for item in items]
            for items in answers]


def test_concurrent_clients_share_one_denoising_batch(fp32_server: tuple[str, Path]) -> None:
    """Requests that queue while the model is busy are filled together, each as it would be alone."""
    url = fp32_server[0]
    files = [LOOP_HEADER.replace("fill_ones", name) for name in ("add", "vadd", "sum2", "plus")]
    alone = [completion_of(url, text, 2, 29)["items"] for text in files]
    assert any(alone), "a completion to compare (the others show nothing, and must stay so)"

    async def scenario() -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
        clients = [RemoteClient(parse_address(url), lambda: TOKEN) for _ in range(len(files) + 1)]
        busy = asyncio.create_task(clients[0].call("fill", LONG))  # holds the model while the others queue
        while (await clients[0].call("status"))["in_flight"] == 0:
            await asyncio.sleep(0.05)
        before = await clients[0].call("status")
        calls = [asyncio.create_task(c.call("complete", {"text": t, "line": 2, "character": 29, "settings": LINE}))
                 for c, t in zip(clients[1:], files, strict=True)]
        while (await clients[0].call("status"))["queued"] < len(files):
            await asyncio.sleep(0.05)
        busy.cancel()
        answers = await asyncio.gather(*calls)
        after = await clients[0].call("status")
        for client in clients:
            await client.close()
        return answers, before, after

    answers, before, after = asyncio.run(scenario())
    assert _clang_timed([answer["items"] for answer in answers]) == _clang_timed(alone)
    assert after["fills"] - before["fills"] >= len(files)
    fills, batches = after["fills"] - before["fills"], after["fill_batches"] - before["fill_batches"]
    # the queued completions' fills ran as one batch; re-masking a failing fill is a batch of its own
    assert fills - batches >= len(files) - 1, "the queued fills ran as one batch (after the long one)"


def test_check_compiles_the_sent_file_with_its_headers(server: tuple[str, Path]) -> None:
    text = '#include "sizes.cuh"\n__global__ void k(float* x) { x[threadIdx.x] = N }\n'
    headers = {"sizes.cuh": "#define N 4\n"}
    report = asyncio.run(ask(server[0], "check", {"text": text, "path": "k.cu", "files": headers}))
    errors = [d for d in report["diagnostics"] if d["severity"] == "error"]
    assert errors and errors[0]["range"]["start"]["line"] == 1, "nvcc ran on the file, with its header found"
    fixed = asyncio.run(ask(server[0], "check", {"text": text.replace("N }", "N; }"), "path": "k.cu",
                                                 "files": headers}))
    assert not [d for d in fixed["diagnostics"] if d["severity"] == "error"]
    assert fixed["kernels"][0]["name"] == "k(float*)" and fixed["kernels"][0]["registers"] > 0


@pytest.mark.slow
def test_a_client_reconnects_after_a_server_restart() -> None:
    with serving("--port", "0") as (url, _):
        client = RemoteClient(parse_address(url))
        loop = asyncio.new_event_loop()
        assert loop.run_until_complete(client.call("status"))["state"] == "ready"
    with pytest.raises(RemoteError) as down:
        loop.run_until_complete(client.call("status"))
    assert down.value.code in ("unreachable", "connection_lost")
    with serving("--port", str(port_of(url))):
        assert loop.run_until_complete(client.call("status"))["state"] == "ready"
    loop.run_until_complete(client.close())
    loop.close()


def test_an_unreachable_server_is_a_clear_error_not_a_hang() -> None:
    port = free_port()
    with pytest.raises(RemoteError, match="cannot reach the dice server") as failed:
        asyncio.run(ask(f"tcp://127.0.0.1:{port}", "status"))
    assert failed.value.code == "unreachable"


def test_a_full_server_answers_busy_and_a_unix_socket_is_private_to_its_owner(tmp_path: Path) -> None:
    """(One server for both, on a Unix socket with room for one request: each start costs a torch import and a
    model load.)"""
    path = tmp_path / "dice.sock"
    with serving("--socket", str(path), "--max-pending", "1") as (url, _):
        # a unix socket is private to its owner
        assert url == f"unix://{path}"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert asyncio.run(ask(url, "status", token=None))["model"] == "dice-tiny"

        # a full server answers busy
        async def scenario() -> None:
            client = RemoteClient(parse_address(url))
            long = asyncio.create_task(client.call("fill", LONG))
            while (await client.call("status"))["in_flight"] == 0:  # status is always answered
                await asyncio.sleep(0.05)
            with pytest.raises(RemoteError, match="busy") as refused:
                await client.call("complete", {"text": SOURCE, "line": 7, "character": 4})
            assert refused.value.code == "busy"
            long.cancel()
            await client.close()

        asyncio.run(scenario())
    assert not path.exists(), "the socket is removed on shutdown"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dice_lsp.cli", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_listening_beyond_loopback_needs_a_token() -> None:
    result = run_cli("serve", "--host", "0.0.0.0", "--port", "0")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "without a token" in result.stderr


@pytest.mark.parametrize(("args", "expected"), [
    (["--token-file", "/nonexistent/token"], "token file /nonexistent/token"),
    (["--model", "/nonexistent/model"], "no such folder"),
    (["--port", "70000"], "a port is 0-65535"),
    (["--port", "{busy}"], "Address already in use"),
])
def test_a_server_that_cannot_start_says_why_in_one_line(args: list[str], expected: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = run_cli("serve", *(arg.replace("{busy}", port) for arg in args))
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and expected in result.stderr


def test_cli_complete_through_the_server_prints_what_a_local_run_prints(server: tuple[str, Path]) -> None:
    url, tokens = server
    common = ["complete", str(EXAMPLES / "vector_add.cu"), "--line", "7", "--character", "4", "--max-tokens", "24",
              "--json"]
    remote, refused = cli_runs([*common, "--server", url, "--token-file", str(tokens)], [*common, "--server", url])
    local = cli_here(*common, "--no-compile-check")  # the server does not compile fills
    assert remote.returncode == 0 and local.returncode == 0

    def shown(stdout: str) -> list[tuple[Any, ...]]:
        """What is shown, where it came from and how sure the filter is, and the checks that do not depend on
        time (clang's verdict may differ: the server's check has the editor's time bound, the CLI waits)."""
        return [(item["text"], item["range"], item["source"], item["confidence"], item["checks"]["parses"],
                 item["checks"]["names"]) for item in json.loads(stdout)["items"]]

    assert shown(remote.stdout) == shown(local.stdout)
    assert refused.returncode == 2 and "token is required" in refused.stderr
    assert refused.stderr.count("\n") == 1


def test_cli_status_is_a_health_probe(server: tuple[str, Path]) -> None:
    url, tokens = server
    port = free_port()
    ready, as_json, down = cli_runs(["status", "--server", url, "--token-file", str(tokens)],
                                    ["status", "--server", url, "--token-file", str(tokens), "--json"],
                                    ["status", "--server", f"tcp://127.0.0.1:{port}"])
    assert ready.returncode == 0 and "ready: dice-tiny" in ready.stdout
    assert json.loads(as_json.stdout)["state"] == "ready"
    assert down.returncode == 2 and down.stderr.count("\n") == 1 and "Connection refused" in down.stderr


@pytest.mark.slow
def test_cli_check_bench_repair_and_optimize_through_the_server(server: tuple[str, Path], tmp_path: Path) -> None:
    """Each file command with --server sends the file and its headers, and prints what a local run prints."""
    url, tokens = server
    remote = ["--server", url, "--token-file", str(tokens)]
    (tmp_path / "sizes.cuh").write_text("#define N 4\n")
    broken = tmp_path / "k.cu"
    broken.write_text('#include "sizes.cuh"\n__global__ void k(float* x) { x[threadIdx.x] = N }\n')
    there, here, refused = cli_runs(["check", str(broken), "--json", *remote], ["check", str(broken), "--json"],
                                    ["check", str(broken), "-I", str(tmp_path), *remote])
    assert refused.returncode == 2 and "-I does not reach a team server" in refused.stderr
    assert there.returncode == here.returncode == 1
    assert json.loads(there.stdout)["diagnostics"] == json.loads(here.stdout)["diagnostics"]

    saxpy = tmp_path / "saxpy.cu"
    good = (EXAMPLES / "saxpy.cu").read_text()
    saxpy.write_text(good.replace("y[i] = a * x[i] + y[i];", "y[i] = a * x[i] + y[i]"))
    [there] = cli_runs(["repair", str(saxpy), "--rounds", "1", "--json", *remote])
    here = cli_here("repair", str(saxpy), "--rounds", "1", "--json")
    assert there.returncode == here.returncode == 0
    assert json.loads(there.stdout)["text"] == json.loads(here.stdout)["text"] == good

    saxpy.write_text(good)
    bench = run_cli("bench", str(saxpy), "--json", *remote)
    report = json.loads(bench.stdout)
    assert report["compile"]["ok"], "the server built the file it was sent"
    assert bench.returncode == (0 if report["gpu"] else 3)

    optimize = ["optimize", str(saxpy), "--kernel", "saxpy", "--candidates", "4", "--rounds", "0", "--json"]
    [there] = cli_runs([*optimize, *remote])
    here = cli_here(*optimize)
    result, local = json.loads(there.stdout), json.loads(here.stdout)
    assert result["kernel"] == "saxpy" and result["generated"] == 4
    assert [c["rank"] for c in result["candidates"]] == list(range(1, len(result["candidates"]) + 1))
    same = ("origin", "compiled", "failure", "less_work", "diff")  # the server's answer is the local one, exactly
    assert [{k: c[k] for k in same} for c in result["candidates"]] == [{k: c[k] for k in same}
                                                                       for c in local["candidates"]]
    assert (there.returncode, result["text"], result["summary"]) == (here.returncode, local["text"], local["summary"])
