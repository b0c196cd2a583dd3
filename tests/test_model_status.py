"""The model's status (`jobs.status.ModelStatus`) leaves as JSON with the keys each state has always had:
the `dice/status` notification and the team server's `status` reply are read by clients by these keys."""

from __future__ import annotations

from dice_lsp.jobs.status import ModelStatus


def test_each_state_has_its_keys_in_order() -> None:
    assert ModelStatus("idle").to_json() == {"state": "idle"}
    assert list(ModelStatus("loading", "dice-tiny").to_json().items()) == [("state", "loading"), ("model", "dice-tiny")]
    assert list(ModelStatus.failed("/models/x", "no config.json").to_json().items()) == [
        ("state", "error"), ("model", "/models/x"), ("message", "no config.json"), ("code", "load_failed")]
    assert ModelStatus.failed("tcp://gpu:7878", "cannot reach the dice server", "unreachable").to_json()["code"] == \
        "unreachable"
    assert list(ModelStatus.ready("dice-tiny", "cpu", "torch.float32").to_json().items()) == [
        ("state", "ready"), ("model", "dice-tiny"), ("device", "cpu"), ("dtype", "torch.float32")]


def test_a_team_servers_ready_status_names_the_server_and_keeps_what_it_did_not_say() -> None:
    assert ModelStatus.ready("dice-tiny", None, None, "tcp://gpu:7878").to_json() == {
        "state": "ready", "model": "dice-tiny", "device": None, "dtype": None, "server": "tcp://gpu:7878"}
