"""A real LSP client (pytest-lsp) against the real `dice-lsp` process and the embedded model."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

SERVER = ClientServerConfig(server_command=[sys.executable, "-m", "dice_lsp.cli"],
                            server_env={**os.environ, "HF_HUB_OFFLINE": "1"})
# `dice-lsp` whose model writes fixed text (tests/fake_model.py); `fake_fills` says what, `fake_calls` what it did
FAKE_MODEL_DIR = Path(tempfile.mkdtemp(prefix="dice-fake-model-"))
FAKE_SERVER = ClientServerConfig(server_command=[sys.executable, str(Path(__file__).with_name("fake_model.py"))],
                                 server_env={**os.environ, "HF_HUB_OFFLINE": "1",
                                             "DICE_FAKE_MODEL": str(FAKE_MODEL_DIR)})
# the document lives in a folder of its own: the server watches the folder of what it opens, and a test must not
# have it watch (or read) the machine's real folders
DOCUMENT_DIR = Path(tempfile.mkdtemp(prefix="dice-lsp-document-"))
URI = (DOCUMENT_DIR / "kernel.cu").as_uri()
KERNEL = (
    "#include <cuda_runtime.h>\n\n"
    "__global__ void scale(float* out, const float* in, float s, int n) {\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    \n"  # the cursor goes here: line 4, character 4
    "}\n"
)


LOOP_HEADER = (  # a half-typed loop header dice-tiny finishes with code that parses, resolves and compiles
    "__device__ void fill_ones(float* out, int n) {\n"
    "    int tid = threadIdx.x;\n"
    "    for (int i = tid; i < n; \n"  # the cursor: line 2, character 29
    "        out[i] = 1.0f;\n    }\n}\n"
)

ADD_KERNEL = ("__global__ void add(const float* a, const float* b, float* c, int n) {\n"
              "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
              "    if (i < n) c[i] = a[i] + b[i];\n"
              "}\n")
TWO_KERNELS = (  # the second kernel's index line, which the product proposes from the first (and shows by default)
    f"{ADD_KERNEL}\n"
    "__global__ void sub(const float* a, const float* b, float* c, int n) {\n"
    "    \n"  # the cursor: line 6, character 4
    "    if (i < n) c[i] = a[i] - b[i];\n"
    "}\n"
)
INDEX_LINE = "int i = blockIdx.x * blockDim.x + threadIdx.x;"


def editor_types_verdicts() -> set[bool | None]:
    """What the editor's clang check may say of a fill clang accepts: True, or None (cannot tell) when its run
    outlasted the editor's time budget (a busy machine; the budget is the product's, `FrontEnd.warm_timeout`),
    never False; without clang (apt-get install clang) always None. The verdict itself is asserted exactly where
    the caller waits for it (`dice-lsp complete`, tests/test_cli_complete.py)."""
    from dice_lsp.toolchain.clang import find_clang

    return {True, None} if find_clang() is not None else {None}

FAST = {"steps": 4, "maxCanvas": 24}


def fake_fills(texts: list[str], hold: int = 0) -> None:
    """What the fake model writes from now on (round robin over `texts`); its first `hold` generations wait,
    after one model call, until their request is cancelled."""
    (FAKE_MODEL_DIR / "fills.json").write_text(json.dumps(texts))
    (FAKE_MODEL_DIR / "hold").write_text(str(hold))


def fake_gpu(speedups: dict[str, float] | None) -> None:
    """From now on the fake server optimizes as on a GPU whose harness verifies the rewrites containing one of
    the texts at its speedup (tests/fake_model.py); None: no GPU again."""
    gpu = FAKE_MODEL_DIR / "gpu.json"
    if speedups is None:
        gpu.unlink(missing_ok=True)
    else:
        gpu.write_text(json.dumps(speedups))


def fake_calls() -> list[str]:
    """The fake model's log: `generation N started` per generation that made its first model call."""
    log = FAKE_MODEL_DIR / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


async def fake_generation_started(number: int) -> None:
    """Wait until the fake model's generation `number` has made its first model call (and, when held, waits)."""
    async def poll() -> None:
        while f"generation {number} started" not in fake_calls():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout=120)


async def start(client: LanguageClient, options: dict[str, Any] | None = None,
                configuration: dict[str, Any] | None = None, workspace: Path | None = None) -> list[dict[str, Any]]:
    """initialize + initialized with VS Code's capabilities; returns the dice/status log, kept up to date.

    `options` are the initializationOptions; `configuration` is what the client answers for the `dice`
    section of workspace/configuration (it wins over the options, as in VS Code); `workspace` is the
    workspace folder the editor opened.
    """
    statuses: list[dict[str, Any]] = []

    @client.feature("dice/status")
    def on_status(params: Any) -> None:
        statuses.append({k: getattr(params, k) for k in dir(params) if not k.startswith("_")}
                        if not isinstance(params, dict) else params)

    client.set_configuration(configuration if configuration is not None else FAST, section="dice")
    await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        initialization_options=options if options is not None else {"dice": {"device": "cpu"}},
        workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)] if workspace else None))
    return statuses


def open_document(client: LanguageClient, text: str = KERNEL, uri: str = URI) -> None:
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(uri=uri, language_id="cuda-cpp", version=1, text=text)))


async def wait_status(statuses: list[dict[str, Any]], state: str, after: int = 0) -> dict[str, Any]:
    """The first dice/status with `state` at index >= `after` (polling: notifications may already be in)."""
    async def poll() -> dict[str, Any]:
        while True:
            found = [s for s in statuses[after:] if s["state"] == state]
            if found:
                return found[0]
            await asyncio.sleep(0.05)

    return await asyncio.wait_for(poll(), timeout=120)


async def ready(statuses: list[dict[str, Any]], client: LanguageClient) -> dict[str, Any]:
    """Wait for the model-load status to settle."""
    async def poll() -> dict[str, Any]:
        while not statuses or statuses[-1]["state"] in ("loading", "idle"):
            await asyncio.sleep(0.05)
        return statuses[-1]

    return await asyncio.wait_for(poll(), timeout=120)


def read_code_actions_as_vscode_does(client: LanguageClient) -> None:
    """lsprotocol's client reads any code action that has a `command` key as a Command, also a CodeAction
    that carries one; VS Code tells them apart by that key's type (a string only for a Command)."""
    converter = client.protocol._converter

    def structure(obj: Any, _: type) -> types.Command | types.CodeAction:
        command = isinstance(obj.get("command"), str)
        return converter.structure(obj, types.Command if command else types.CodeAction)  # type: ignore[no-any-return]

    converter.register_structure_hook(types.Command | types.CodeAction, structure)  # type: ignore[arg-type]


async def diagnostics_for(client: LanguageClient, uri: str) -> list[types.Diagnostic]:
    while uri not in client.diagnostics:
        await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return client.diagnostics.pop(uri)
