"""A Ray driver that deploys the team service on Ray Serve as `serve run server/configs/cpu-local.yaml` does
(a new local Ray cluster, the embedded model on CPU), with its dashboard on a given port, for the tests of the
gateway and of `dice-lsp serve status` (tests/test_ray_serve.py).

    python tests/ray_serve_driver.py DASHBOARD_PORT [TOKEN_FILE]

prints `ready URL GATEWAY` (the dashboard's URL, the gateway's address) once the application runs, then obeys
stdin: a line `serve down` shuts Ray Serve down (the cluster stays up; it answers `serve down`), end of input
shuts Ray down and exits. The gateway listens on a port the OS picks (the config's 7077 may be taken on a test
machine), and with TOKEN_FILE it requires that file's token.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml  # type: ignore[import-untyped]

CONFIG = Path(__file__).resolve().parents[1] / "server" / "configs" / "cpu-local.yaml"


def main(dashboard_port: int, token_file: str | None) -> None:
    said = os.fdopen(os.dup(sys.stdout.fileno()), "w")  # this script's lines; whatever Ray prints goes to stderr
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    import ray
    from ray import serve

    from dice_lsp.remote.ray_serve import build_app

    [app] = yaml.safe_load(CONFIG.read_text())["applications"]
    context = ray.init(num_cpus=2, include_dashboard=True, dashboard_host="127.0.0.1", dashboard_port=dashboard_port,
                       log_to_driver=False, runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1"}})
    try:
        serve.start(proxy_location="Disabled")
        tokens = {"token_file": token_file} if token_file else {}
        handle = serve.run(build_app({**app["args"], "port": 0, **tokens}), name=app["name"], route_prefix=None)
        print("ready", f"http://{context.dashboard_url}", handle.address.remote().result(), file=said, flush=True)
        for line in sys.stdin:
            if line.strip() == "serve down":
                serve.shutdown()
                print("serve down", file=said, flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
