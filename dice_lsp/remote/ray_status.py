"""`dice-lsp serve status`: the health of the team service deployed on Ray Serve, read from Ray's dashboard.

Ray Serve publishes each application's state and each deployment's health at the dashboard's REST endpoint
`/api/serve/applications/` (what Ray's own `serve status` prints). Since Ray 2.52 the dashboard may require
Ray's token (`RAY_AUTH_MODE=token`), and since Ray 2.59 every local cluster that `ray.init()` or `serve run`
starts requires it by default, writing the token to `~/.ray/auth_token`; a client has to send it as an
`Authorization: Bearer` header. Ray's CLI sends it only where its own `RAY_AUTH_MODE` says `token`, so on such
a cluster a plain `serve status` fails with an authentication error. This module reads the token the way Ray
does (`RAY_AUTH_TOKEN`, else the file `RAY_AUTH_TOKEN_PATH` names, else `~/.ray/auth_token`) and sends it
whenever one is found: a cluster without token authentication (Ray 2.40 to 2.58 by default) ignores it.

Nothing here imports Ray: a probe is one HTTP request (no Ray driver is connected, so none is registered as
a job on the cluster each time a health check runs), and it works on a host without Ray installed.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dice_lsp.errors import DiceError

DEFAULT_DASHBOARD = "http://127.0.0.1:8265"  # where `serve run` and `ray start --head` put the dashboard
DEFAULT_APP = "dice"  # the application's name in server/configs/*.yaml
APPLICATIONS = "/api/serve/applications/"
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class DeploymentHealth:
    """One deployment of the application: Ray Serve's status (`HEALTHY`, `UPDATING`, `UNHEALTHY`, ...)."""

    name: str
    status: str
    message: str
    running: int  # replicas in state RUNNING
    target: int | None  # replicas Ray Serve is aiming for (absent from some Ray versions' answers)

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message, "running_replicas": self.running,
                "target_replicas": self.target}


@dataclass(frozen=True)
class ServeHealth:
    """An application's state as Ray Serve reports it (`RUNNING`, `DEPLOYING`, `DEPLOY_FAILED`, ...)."""

    address: str
    app: str
    status: str
    message: str
    deployments: tuple[DeploymentHealth, ...]

    @property
    def healthy(self) -> bool:
        """Running, with every deployment healthy: Ray Serve routes requests to it and nothing is restarting."""
        return self.status == "RUNNING" and all(d.status == "HEALTHY" for d in self.deployments)

    def to_json(self) -> dict[str, Any]:
        return {"address": self.address, "application": self.app, "status": self.status, "healthy": self.healthy,
                "message": self.message, "deployments": {d.name: d.to_json() for d in self.deployments}}

    def line(self) -> str:
        """`dice at http://…: RUNNING; DiceReplica HEALTHY (1 of 1 replicas running), Gateway HEALTHY (…)`."""
        parts = []
        for d in self.deployments:
            count = f"{d.running} of {d.target}" if d.target is not None else str(d.running)
            said = f": {last_line(d.message)}" if d.message and d.status != "HEALTHY" else ""
            parts.append(f"{d.name} {d.status} ({count} replicas running){said}")
        said = f" ({last_line(self.message)})" if self.message else ""
        return f"{self.app} at {self.address}: {self.status}{said}; " + (", ".join(parts) or "no deployments")


def last_line(message: str) -> str:
    """The last non-empty line of a message: where Ray Serve's tracebacks name the exception."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def ray_token() -> tuple[str, str] | None:
    """Ray's token and where it came from, looked up in Ray's own order; None where there is none.

    `RAY_AUTH_MODE=disabled` does not stop the lookup: a token sent to a cluster that does not check tokens
    is ignored, and one that does check them needs it whatever this process's environment says.
    """
    if os.environ.get("RAY_AUTH_TOKEN", "").strip():
        return os.environ["RAY_AUTH_TOKEN"].strip(), "RAY_AUTH_TOKEN"
    named = os.environ.get("RAY_AUTH_TOKEN_PATH")
    path = Path(named).expanduser() if named else Path.home() / ".ray" / "auth_token"
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise DiceError(f"cannot read Ray's token {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    if not token and named:  # as Ray does: a token file that was named must hold the token
        raise DiceError(f"RAY_AUTH_TOKEN_PATH names {path}, which holds no token")
    return (token, str(path)) if token else None


def dashboard_url(address: str | None) -> str:
    """The dashboard's base URL: `--address`, else RAY_DASHBOARD_ADDRESS (as for Ray's CLI), else loopback."""
    url = (address or os.environ.get("RAY_DASHBOARD_ADDRESS") or DEFAULT_DASHBOARD).rstrip("/")
    return url if "://" in url else f"http://{url}"


def fetch(url: str, timeout: float) -> dict[str, Any]:
    """The dashboard's JSON at `url + APPLICATIONS`, the token sent where one is found; one-line DiceErrors."""
    found = ray_token()
    headers = {"Authorization": f"Bearer {found[0]}"} if found else {}
    request = urllib.request.Request(url + APPLICATIONS, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise DiceError(refused(url, exc.code, exc.read().decode("utf-8", "replace"), found)) from exc
    except TimeoutError as exc:
        raise DiceError(f"the Ray dashboard at {url} did not answer within {timeout:g} s") from exc
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, TimeoutError):
            raise DiceError(f"the Ray dashboard at {url} did not answer within {timeout:g} s") from exc
        reason = exc.reason.strerror if isinstance(exc.reason, OSError) and exc.reason.strerror else exc.reason
        raise DiceError(f"no Ray dashboard answers at {url} ({reason}): is the Ray cluster up? "
                        "(--address or RAY_DASHBOARD_ADDRESS names another)") from exc
    except (OSError, ValueError) as exc:
        raise DiceError(f"cannot ask the Ray dashboard at {url}: {exc}") from exc
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise DiceError(f"{url} is not a Ray dashboard (its answer to {APPLICATIONS} is not JSON)") from exc
    if not isinstance(data, dict) or not isinstance(data.get("applications"), dict):
        raise DiceError(f"{url} is not a Ray dashboard (its answer to {APPLICATIONS} has no applications)")
    return data


def refused(url: str, code: int, body: str, token: tuple[str, str] | None) -> str:
    """One line for an HTTP error of the dashboard, saying what to do about a missing or wrong token."""
    if code == 401:
        return (f"the Ray dashboard at {url} requires Ray's token and none was found: set RAY_AUTH_TOKEN_PATH "
                "to the cluster's token file (~/.ray/auth_token of the user who started Ray) or RAY_AUTH_TOKEN")
    if code == 403:
        source = token[1] if token else "the request"
        return f"the Ray dashboard at {url} refused the token from {source}: it is not this cluster's token"
    if code == 404:
        return f"{url} has no {APPLICATIONS}: not a Ray dashboard, or one without Ray Serve"
    return f"the Ray dashboard at {url} answered HTTP {code}: {last_line(body)[:200]}"


def serve_health(address: str | None = None, app: str = DEFAULT_APP, timeout: float = TIMEOUT_S) -> ServeHealth:
    """The application `app`'s state; a DiceError (one line) where Ray, Serve or the application is not there."""
    url = dashboard_url(address)
    if not url.startswith(("http://", "https://")):
        raise DiceError(f"--address {url}: the Ray dashboard's address is an http:// or https:// URL")
    data = fetch(url, timeout)
    apps: dict[str, Any] = data["applications"]
    if not apps and not data.get("controller_info"):
        raise DiceError(f"Ray Serve is not running on the Ray cluster at {url} (`serve run` or `serve deploy` "
                        "starts it)")
    if app not in apps:
        have = ", ".join(sorted(apps)) or "none"
        raise DiceError(f"Ray Serve at {url} has no application named {app} (applications: {have})")
    details = apps[app]
    deployments = tuple(
        DeploymentHealth(name, str(d.get("status", "")), str(d.get("message") or ""),
                         sum(1 for r in d.get("replicas") or [] if r.get("state") == "RUNNING"),
                         d.get("target_num_replicas") if isinstance(d.get("target_num_replicas"), int) else None)
        for name, d in sorted((details.get("deployments") or {}).items()))
    return ServeHealth(url, app, str(details.get("status", "")), str(details.get("message") or ""), deployments)
