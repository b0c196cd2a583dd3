"""server/deploy/dice-lsp-team.service: systemd accepts it, its command line is one the real CLI parses, and,
booted under a real systemd (a throwaway systemd-nspawn container of this host), server/deploy/install-unit.sh
installs it, the server answers `dice-lsp status` with its sandbox on, restarts after a crash, and stays down
with its one line in the journal after a refusal to start."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dice_lsp.cli import build_parser, cmd_serve

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "server" / "deploy"
UNIT = DEPLOY / "dice-lsp-team.service"
PREFIX = "/opt/dice-lsp"  # where server/README.md installs dice-lsp for the unit
BOOT_TIMEOUT_S = 120


def unit_entries(text: str) -> list[tuple[str, str, str]]:
    """(section, key, value) of every assignment of a unit file, in order (a key may repeat)."""
    entries, section = [], ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        entries.append((section, key.strip(), value.strip()))
    return entries


def service_value(key: str) -> str:
    [value] = [v for section, k, v in unit_entries(UNIT.read_text()) if (section, k) == ("Service", key)]
    return value


def exec_start_argv(environment_file: Path | None) -> list[str]:
    """ExecStart as systemd runs it: `$NAME` replaced by the words of NAME's value, from Environment= and then
    the EnvironmentFile (the example of server/deploy when given, none otherwise)."""
    env = dict(assignment.split("=", 1) for assignment in shlex.split(service_value("Environment")))
    if environment_file is not None:
        env.update(line.split("=", 1) for line in environment_file.read_text().splitlines()
                   if line.strip() and not line.startswith("#"))
    argv: list[str] = []
    for word in shlex.split(service_value("ExecStart")):
        argv += shlex.split(env[word[1:]]) if word.startswith("$") else [word]
    return argv


def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    # verify checks that ExecStart's program exists: the one installed here stands in for /opt/dice-lsp's
    installed = Path(sys.executable).parent / "dice-lsp"
    assert installed.is_file()
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace(f"{PREFIX}/bin/dice-lsp", str(installed)))
    verified = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert (verified.returncode, verified.stdout, verified.stderr) == (0, "", ""), "unknown or bad settings"


@pytest.mark.parametrize("environment_file", [None, DEPLOY / "dice-lsp-team.env"], ids=["no env file", "example"])
def test_exec_start_is_a_command_line_of_the_real_cli(environment_file: Path | None) -> None:
    argv = exec_start_argv(environment_file)
    assert argv[0] == f"{PREFIX}/bin/dice-lsp"
    args = build_parser().parse_args(argv[1:])
    assert args.handler is cmd_serve
    assert (args.host, args.port, args.token_file) == ("0.0.0.0", 7077, "/etc/dice-lsp/token")
    if environment_file is None:
        assert (args.model, args.device) == (None, "auto"), "without serve.env: the embedded model"
    else:
        assert (args.model, args.device, args.max_pending) == ("/models/dice-8b", "cuda", 64)


def test_the_user_the_unit_runs_as_is_the_one_the_install_makes() -> None:
    [user] = [line.split()[1] for line in (DEPLOY / "dice-lsp.sysusers").read_text().splitlines()
              if line.startswith("u ")]
    assert service_value("User") == service_value("Group") == user == "dice-lsp"
    script = DEPLOY / "install-unit.sh"
    assert os.access(script, os.X_OK)
    assert subprocess.run(["sh", "-n", str(script)], capture_output=True).returncode == 0
    for name in ("dice-lsp.sysusers", "dice-lsp-team.service"):
        assert f'"$here/{name}"' in script.read_text() and (DEPLOY / name).is_file()


class Container:
    """A systemd-nspawn container booted from this host's own root (a tmpfs root with /usr read-only:
    nothing it writes reaches the host), with a private network and the repository and Python read-only.
    It boots to basic.target, so that the host's own services (a wait for the network, timers) stay out of
    it; units that would touch the host's kernel or devices are masked."""

    MASKED = ("systemd-sysctl.service", "systemd-udevd.service", "systemd-udev-trigger.service",
              "systemd-binfmt.service", "systemd-modules-load.service", "proc-sys-fs-binfmt_misc.automount")

    def __init__(self, shared: list[Path], log: Path) -> None:
        binds = [f"--bind-ro={path}" for path in shared]
        masks = " ".join(f"systemd.mask={unit}" for unit in self.MASKED)
        # Without a systemd on the host: no machine registration or scope unit (--register=no, --keep-unit),
        # and the folder nspawn cleans up after itself on a tmpfs of its own mount namespace.
        command = ("mkdir -p /run/systemd/nspawn && mount -t tmpfs tmpfs /run/systemd/nspawn && exec systemd-nspawn "
                   f"-D / --volatile=yes --register=no --keep-unit --private-network -M dice-unit-{os.getpid()} "
                   f"{' '.join(map(shlex.quote, binds))} -b -- systemd.firstboot=off systemd.unit=basic.target {masks}")
        # /proc/sys writable: bubblewrap sets user.max_user_namespaces in the sandbox's own user namespace
        env = {**os.environ, "SYSTEMD_NSPAWN_API_VFS_WRITABLE": "yes"}
        with log.open("w") as sink:
            self.nspawn = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", command],
                                           stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, env=env)
        self.log = log
        self.init = 0

    def boot(self) -> None:
        """Wait for the container's systemd to finish booting (`degraded`: a unit of the host's own failed)."""
        self.init = self._init_pid()
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while True:  # until systemd answers on its bus, then until it has booted
            booted = self.run("systemctl", "is-system-running", "--wait", timeout=BOOT_TIMEOUT_S)
            if booted.stdout.strip() or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert booted.stdout.strip() in ("running", "degraded"), booted

    def _init_pid(self) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            children = Path(f"/proc/{self.nspawn.pid}/task/{self.nspawn.pid}/children")
            if self.nspawn.poll() is not None:
                raise AssertionError(f"systemd-nspawn stopped: {self.log.read_text()[-2000:]}")
            pids = children.read_text().split() if children.exists() else []
            if pids and Path(f"/proc/{pids[0]}/comm").read_text().strip() == "systemd":
                return int(pids[0])
            time.sleep(0.2)
        raise AssertionError(f"the container's systemd did not start: {self.log.read_text()[-2000:]}")

    def run(self, *command: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["nsenter", "-t", str(self.init), "-a", *command], capture_output=True, text=True,
                              timeout=timeout)

    def sh(self, script: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return self.run("sh", "-c", script, timeout=timeout)

    def until(self, script: str, expected: str, timeout: float = 60) -> str:
        """Run `script` in the container until it prints `expected` (its last output otherwise, for the assert)."""
        deadline, said = time.monotonic() + timeout, ""
        while time.monotonic() < deadline:
            said = self.sh(script).stdout.strip()
            if said == expected:
                break
            time.sleep(0.5)
        return said

    def stop(self) -> None:
        """SIGTERM to nspawn powers the container off; its PID 1 killed ends whatever is left."""
        self.nspawn.terminate()
        try:
            self.nspawn.wait(timeout=30)
        except subprocess.TimeoutExpired:
            if self.init:
                os.kill(self.init, 9)
            self.nspawn.kill()
            self.nspawn.wait(timeout=30)


@pytest.fixture
def container(tmp_path: Path) -> Iterator[Container]:
    missing = [tool for tool in ("systemd-nspawn", "unshare", "nsenter", "bwrap") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (apt-get install systemd-container bubblewrap)")
    if os.geteuid() != 0:
        pytest.skip("booting a systemd-nspawn container needs root")
    # the checkout and its Python, where the container's /usr (the host's) does not hold them
    shared = sorted({p for p in (ROOT, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve())
                     if not p.is_relative_to("/usr")})
    booted = Container(shared, tmp_path / "nspawn.log")
    try:
        booted.boot()
        yield booted
    finally:
        booted.stop()


@pytest.mark.slow
def test_the_unit_serves_restarts_and_logs_under_systemd(container: Container) -> None:
    # dice-lsp installed in /opt/dice-lsp as the guide says: here, this test's own environment put there
    venv = Path(sys.prefix)
    # ProtectHome= hides /root and /home, PrivateTmp= /tmp and /var/tmp: show the service what of this checkout
    # and its Python lives there (a checkout may be anywhere)
    used = {ROOT, venv.resolve(), Path(sys.base_prefix).resolve()}
    homes = [p for p in used if p.parts[1] in ("root", "home")]
    hidden = sorted(homes + [p for p in used if p.parts[1] == "tmp" or p.is_relative_to("/var/tmp")])
    drop_in = ""
    if hidden:
        drop_in = ("[Service]\n" + ("ProtectHome=tmpfs\n" if homes else "")
                   + "BindReadOnlyPaths=" + " ".join(map(str, hidden)) + "\n")
    setup = container.sh(f"""set -e
        mkdir -p /opt /etc/systemd/system/dice-lsp-team.service.d
        ln -s {shlex.quote(str(venv))} {PREFIX}
        printf %s {shlex.quote(drop_in)} > /etc/systemd/system/dice-lsp-team.service.d/test-host.conf
        {shlex.quote(str(DEPLOY / 'install-unit.sh'))}""")
    assert setup.returncode == 0, setup.stderr
    assert "Created symlink /etc/systemd/system/multi-user.target.wants/dice-lsp-team.service" in setup.stderr

    status = f"{PREFIX}/bin/dice-lsp status --server tcp://127.0.0.1:7077 --token-file /etc/dice-lsp/token --json"
    ready = f"{status} | {venv}/bin/python -c 'import json,sys; print(json.load(sys.stdin)[\"state\"])'"
    journal = "journalctl -u dice-lsp-team -o cat --no-pager"
    assert container.until(ready, "ready") == "ready", container.sh(journal).stdout
    served = json.loads(container.sh(status).stdout)
    assert (served["model"], served["sandbox"]) == ("dice-tiny", "bubblewrap")
    token = container.sh("stat -c '%U %a' /etc/dice-lsp/token; wc -c < /etc/dice-lsp/token").stdout.split()
    assert token == ["dice-lsp", "600", "64"]
    def shown() -> dict[str, str]:
        said = container.sh("systemctl show -p User,ActiveState,NRestarts,ExecMainStatus dice-lsp-team").stdout
        return dict(line.split("=", 1) for line in said.splitlines())

    assert shown() == {"User": "dice-lsp", "ActiveState": "active", "NRestarts": "0", "ExecMainStatus": "0"}
    logged = container.sh(journal).stdout
    assert "dice-lsp: serving dice-tiny on tcp://0.0.0.0:7077 (token required); Ctrl+C stops" in logged
    assert "compiles and user code run in the sandbox (bubblewrap, uid 65534)" in logged

    from dice_lsp.errors import DiceError
    from dice_lsp.toolchain.nvcc import find_nvcc

    try:
        nvcc: Path | None = find_nvcc()
    except DiceError:
        nvcc = None
    if nvcc is not None and nvcc.resolve().is_relative_to("/usr"):  # the container sees the host's /usr only
        checked = container.sh(f"cd {ROOT} && {PREFIX}/bin/dice-lsp check examples/saxpy.cu --json --server "
                               "tcp://127.0.0.1:7077 --token-file /etc/dice-lsp/token", timeout=180)
        assert checked.returncode == 0, checked.stderr
        assert json.loads(checked.stdout)["diagnostics"] == [], "nvcc ran in the sandbox under the unit"

    # a crash: systemd starts it again
    container.sh("kill -9 $(systemctl show -P MainPID dice-lsp-team)")
    assert container.until("systemctl show -P NRestarts dice-lsp-team", "1") == "1"
    assert container.until(ready, "ready") == "ready", container.sh(journal).stdout

    # a refusal to start (a token others may read): exit 2, one line in the journal, no restart loop
    container.sh("chmod 644 /etc/dice-lsp/token && systemctl restart dice-lsp-team")
    assert container.until("systemctl is-active dice-lsp-team", "failed") == "failed"
    assert shown() == {"User": "dice-lsp", "ActiveState": "failed", "NRestarts": "0", "ExecMainStatus": "2"}
    last_start = container.sh(journal).stdout.rsplit("Started dice-lsp-team.service", 1)[1].splitlines()[1:]
    assert [line for line in last_start if not line.startswith("dice-lsp-team.service: ")] == [
        "dice-lsp: error: token file /etc/dice-lsp/token is readable by other users (mode 0644): "
        "chmod 600 /etc/dice-lsp/token"]
    assert "dice-lsp-team.service: Main process exited, code=exited, status=2/INVALIDARGUMENT" in last_start
