"""server/deploy/Containerfile: what it copies exists, it runs as its own user, its entrypoint and its
healthcheck are command lines of the real CLI that agree on the port and the token; and, where a person
asks for it (DICE_IMAGE_BUILD_ARGS, podman), the image is built and run: unhealthy while the model loads,
healthy once it is ready, the sandbox on, and a one-line refusal without the security options it needs."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dice_lsp.cli import build_parser, cmd_serve, cmd_status

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "server" / "deploy" / "Containerfile"
TOKEN = "/run/secrets/dice-lsp/token"
SANDBOX_OPTIONS = ["--security-opt", "seccomp=unconfined", "--security-opt", "unmask=/proc/*"]  # podman's


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the recipe, continuation lines joined and comments dropped."""
    logical, current = [], ""
    for line in RECIPE.read_text().splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        current += line.rstrip().removesuffix("\\") + " " if line.rstrip().endswith("\\") else line
        if not line.rstrip().endswith("\\"):
            logical.append(current)
            current = ""
    return [(text.split(None, 1)[0].upper(), text.split(None, 1)[1].strip() if " " in text.strip() else "")
            for text in (entry.strip() for entry in logical)]


def only(name: str) -> str:
    [arguments] = [args for instruction, args in instructions() if instruction == name]
    return arguments


def entrypoint() -> list[str]:
    argv: list[str] = json.loads(only("ENTRYPOINT")) + json.loads(only("CMD"))
    return argv


def test_the_recipe_builds_from_a_cuda_devel_image_with_the_sandbox_and_a_compiler() -> None:
    default_base = re.search(r"^ARG BASE_IMAGE=(\S+)$", RECIPE.read_text(), re.M)
    assert default_base and "nvidia/cuda:" in default_base.group(1) and "-devel-" in default_base.group(1)
    assert only("FROM") == "${BASE_IMAGE}"
    installs = [args for instruction, args in instructions() if instruction == "RUN" and "apt-get install" in args]
    assert {"bubblewrap", "g++", "python3", "python3-dev", "python3-venv"} <= set(installs[0].split())


def test_what_the_recipe_copies_is_in_the_repository() -> None:
    copies = [args.split() for instruction, args in instructions() if instruction == "COPY"]
    assert copies
    for *sources, _ in copies:
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the build context (the repository)"


def test_it_runs_as_its_own_unprivileged_user() -> None:
    assert only("USER") == "dice-lsp"
    [made] = [args for instruction, args in instructions() if instruction == "RUN" and "useradd" in args]
    assert re.search(r"useradd --system --uid 10001 --gid 10001 .* dice-lsp", made)


def test_the_entrypoint_is_the_real_serve_command_line() -> None:
    argv = entrypoint()
    venv = [args for instruction, args in instructions() if instruction == "RUN" and "python3 -m venv" in args]
    assert argv[0] == "/opt/dice-lsp/bin/dice-lsp" and "python3 -m venv /opt/dice-lsp " in venv[0]
    served = build_parser().parse_args(argv[1:])
    assert served.handler is cmd_serve
    assert (served.host, served.port, served.token_file, served.model) == ("0.0.0.0", 7077, TOKEN, None)
    assert only("EXPOSE") == str(served.port)
    more = build_parser().parse_args([*argv[1:], "--model", "/models/dice-8b", "--port", "7100"])  # run IMAGE ...
    assert (more.model, more.port, more.token_file) == ("/models/dice-8b", 7100, TOKEN)


def test_the_healthcheck_asks_the_server_the_entrypoint_starts() -> None:
    healthcheck = only("HEALTHCHECK")
    command = shlex.split(healthcheck.split(" CMD ", 1)[1])
    assert command[-5:] == [">", "/dev/null", "||", "exit", "1"]
    status = build_parser().parse_args(command[1:-5])
    served = build_parser().parse_args(entrypoint()[1:])
    assert command[0] == entrypoint()[0] and status.handler is cmd_status
    assert (status.server, status.token_file) == (f"tcp://127.0.0.1:{served.port}", served.token_file)
    assert "--start-period=300s" in healthcheck


class Built:
    """The image built with podman, and containers started from it (removed at the end)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tag = f"localhost/dice-lsp-team:test-{os.getpid()}"
        self.extra_run = shlex.split(os.environ.get("DICE_IMAGE_RUN_ARGS", ""))
        self.names: list[str] = []
        self.secrets = tmp_path / "secrets"
        self.secrets.mkdir()
        token = self.secrets / "token"
        token.write_text("0123456789abcdef0123456789abcdef")
        os.chmod(token, 0o600)
        os.chown(token, 10001, 10001)  # the image's user
        build = subprocess.run(["podman", "build", "--format", "docker", "-f", str(RECIPE), "-t", self.tag,
                                *shlex.split(os.environ["DICE_IMAGE_BUILD_ARGS"]), str(ROOT)],
                               capture_output=True, text=True, timeout=1800)
        assert build.returncode == 0, build.stderr[-3000:]

    def start(self, *options: str) -> str:
        name = f"dice-lsp-test-{os.getpid()}-{len(self.names)}"
        self.names.append(name)
        subprocess.run(["podman", "run", "-d", "--name", name, "--network", "none", *self.extra_run, *options,
                        "-v", f"{self.secrets}:/run/secrets/dice-lsp:ro", self.tag], check=True,
                       capture_output=True, timeout=120)
        return name

    def podman(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["podman", *args], capture_output=True, text=True, timeout=120)

    def remove(self) -> None:
        for name in self.names:
            self.podman("rm", "-f", "-t", "10", name)
        self.podman("rmi", "-f", self.tag)


@pytest.fixture
def image(tmp_path: Path) -> Iterator[Built]:
    if "DICE_IMAGE_BUILD_ARGS" not in os.environ or shutil.which("podman") is None:
        pytest.skip("builds the image with podman where DICE_IMAGE_BUILD_ARGS is set (server/README.md)")
    built = Built(tmp_path)
    try:
        yield built
    finally:
        built.remove()


@pytest.mark.slow
def test_the_image_serves_with_its_sandbox_and_its_healthcheck(image: Built) -> None:
    serving = image.start(*SANDBOX_OPTIONS)
    assert image.podman("healthcheck", "run", serving).stdout.strip() == "unhealthy"  # the model still loads
    deadline = time.monotonic() + 180
    while image.podman("healthcheck", "run", serving).returncode != 0 and time.monotonic() < deadline:
        time.sleep(1)
    assert image.podman("inspect", serving, "--format", "{{.State.Health.Status}}").stdout.strip() == "healthy"
    status = image.podman("exec", serving, "/opt/dice-lsp/bin/dice-lsp", "status", "--server",
                          "tcp://127.0.0.1:7077", "--token-file", TOKEN, "--json")
    assert (json.loads(status.stdout)["state"], json.loads(status.stdout)["sandbox"]) == ("ready", "bubblewrap")
    assert image.podman("exec", serving, "id", "-un").stdout.strip() == "dice-lsp"
    image.podman("stop", "-t", "20", serving)
    assert image.podman("inspect", serving, "--format", "{{.State.ExitCode}}").stdout.strip() == "0"

    confined = image.start()  # the container's own seccomp filter and masked /proc: no sandbox inside
    deadline = time.monotonic() + 60
    while image.podman("inspect", confined, "--format", "{{.State.Running}}").stdout.strip() == "true":
        assert time.monotonic() < deadline
        time.sleep(0.5)
    assert image.podman("inspect", confined, "--format", "{{.State.ExitCode}}").stdout.strip() == "2"
    logs = image.podman("logs", confined)
    refused = [line for line in (logs.stdout + logs.stderr).splitlines() if line.startswith("dice-lsp: error:")]
    assert len(refused) == 1 and "cannot sandbox compiles and user code" in refused[0]
