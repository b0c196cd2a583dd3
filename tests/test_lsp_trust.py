"""Workspace trust (`dice.trusted`, false by default) through a real LSP client and the real server: an
untrusted workspace's compile_commands.json is not used, its kernels are not run on a GPU (benchmarks on
save, the optimize action's verification), a model folder's own Python code never runs; each reason is
said once. Trusting the workspace (new settings from the client) takes effect without a restart."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from .lsp_client import FAST, diagnostics_for, open_document, ready, start, wait_status
from .test_lsp_optimize import EXAMPLE

pytestmark = pytest.mark.asyncio
FAKE_GPU_LOG = Path(tempfile.mkdtemp(prefix="dice-fake-gpu-")) / "gpu.log"
FAKE_GPU = ClientServerConfig(server_command=[sys.executable, str(Path(__file__).with_name("fake_gpu_server.py"))],
                              server_env={**os.environ, "HF_HUB_OFFLINE": "1", "DICE_FAKE_GPU_LOG": str(FAKE_GPU_LOG)})
GUARDED = ('#ifdef FROM_DB\n#error "FROM_DB came from compile_commands.json"\n#endif\n'
           '#ifndef FROM_SETTINGS\n#error "FROM_SETTINGS is missing"\n#endif\n'
           "__global__ void k(float* a) { a[threadIdx.x] = 1.0f; }\n")
UNTRUSTED = {**FAST, "defines": ["FROM_SETTINGS"]}
TWICE = "__global__ void twice(float* a) {\n    a[threadIdx.x] *= 2.0f;\n}\n"


@pytest_lsp.fixture(config=FAKE_GPU)
async def gpu_client(lsp_client: LanguageClient) -> AsyncIterator[None]:
    """A real LSP client connected to a `dice-lsp` that believes it has a GPU and logs what it would run."""
    FAKE_GPU_LOG.unlink(missing_ok=True)
    yield
    await lsp_client.shutdown_session()


def gpu_log() -> list[str]:
    return FAKE_GPU_LOG.read_text().splitlines() if FAKE_GPU_LOG.exists() else []


def workspace_with_database(root: Path, *arguments: str) -> Path:
    """`root/k.cu` (GUARDED) and a compile_commands.json that compiles it with `arguments`."""
    source = root / "k.cu"
    source.write_text(GUARDED)
    (root / "compile_commands.json").write_text(json.dumps([{
        "directory": str(root), "file": "k.cu", "arguments": ["nvcc", *arguments, "-c", "k.cu"]}]))
    return source


async def trust(client: LanguageClient, configuration: dict[str, Any]) -> None:
    """What VS Code does when the user grants trust: new answers to workspace/configuration, and an empty
    workspace/didChangeConfiguration that makes the server ask for them. Returns once the server has taken the
    new settings (its log says `workspace trusted`), however long a busy machine makes that."""
    def said() -> int:
        return sum(m.message == "workspace trusted" for m in client.log_messages)

    before = said()
    client.set_configuration({**configuration, "trusted": True}, section="dice")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))

    async def taken() -> None:
        while said() == before:
            await asyncio.sleep(0.05)

    await asyncio.wait_for(taken(), timeout=60)


def trust_messages(client: LanguageClient) -> list[str]:
    return [m.message for m in client.messages if "not trusted" in m.message]


async def lens_titles(client: LanguageClient, uri: str) -> list[str]:
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    return [lens.command.title for lens in lenses or [] if lens.command is not None]


def save(client: LanguageClient, uri: str) -> None:
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))


async def test_untrusted_a_databases_command_never_runs_and_the_settings_flags_apply(
        client: LanguageClient, tmp_path: Path) -> None:
    planted = tmp_path / "F"
    source = workspace_with_database(tmp_path, "-DFROM_DB", f"-DBUILD_ID=$(touch {planted})")
    await start(client, configuration=UNTRUSTED, workspace=tmp_path)
    open_document(client, GUARDED, source.as_uri())
    diagnostics = await asyncio.wait_for(diagnostics_for(client, source.as_uri()), timeout=60)
    assert [d.message for d in diagnostics] == [], "compiled with dice.defines, not the database's flags"
    assert not planted.exists(), "the database's $(...) never reached a shell"
    [said] = trust_messages(client)
    assert "compile_commands.json is ignored" in said and "dice.trusted" in said


async def test_trusting_the_workspace_applies_its_build_flags_without_a_restart(
        client: LanguageClient, tmp_path: Path) -> None:
    source = workspace_with_database(tmp_path, "-DFROM_DB")
    await start(client, configuration=UNTRUSTED, workspace=tmp_path)
    open_document(client, GUARDED, source.as_uri())
    assert list(await asyncio.wait_for(diagnostics_for(client, source.as_uri()), timeout=60)) == []
    await trust(client, UNTRUSTED)
    trusted = await asyncio.wait_for(diagnostics_for(client, source.as_uri()), timeout=60)
    assert any("FROM_DB came from compile_commands.json" in d.message for d in trusted), \
        "the open document is compiled again, with the database's defines"


async def optimize_twice(client: LanguageClient, uri: str) -> Any:
    """The "Optimize kernel `twice`" command, as VS Code runs it (the edit comes back for its preview)."""
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="dice.optimizeKernel", arguments=[uri, "twice", 1, False]))


async def test_untrusted_nothing_is_benchmarked_on_save_nor_any_candidate_run_on_the_gpu_until_trusted(
        gpu_client: LanguageClient, tmp_path: Path) -> None:
    """Untrusted, nothing is benchmarked on save (the reason said once) and optimize never runs a candidate on the
    GPU; trusted, a save benchmarks the file and candidates go to the GPU. (One server for both: each start costs a
    torch import and a model load.)"""
    client = gpu_client
    path = tmp_path / "saxpy.cu"
    shutil.copy(EXAMPLE, path)
    twice = tmp_path / "twice.cu"
    twice.write_text(TWICE)
    refreshed = asyncio.Event()

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def on_refresh(params: None) -> None:
        refreshed.set()

    configuration = {**FAST, "benchOnSave": True, "diagnostics": False, "optimizeCandidates": 1, "repairRounds": 0}
    statuses = await start(client, configuration=configuration, workspace=tmp_path)
    await ready(statuses, client)
    # untrusted: nothing is benchmarked on save, and the reason is said once
    open_document(client, path.read_text(), path.as_uri())
    for _ in range(2):
        save(client, path.as_uri())
    await asyncio.wait_for(refreshed.wait(), timeout=60)
    await asyncio.sleep(0.5)  # the second save has been handled too
    assert gpu_log() == [], "no GPU probed, nothing built or run"
    [said] = trust_messages(client)
    assert "benchmarks on save do not run" in said and "dice.trusted" in said
    assert "benchmark: not run: workspace not trusted" in await lens_titles(client, path.as_uri())
    # untrusted: optimize never runs a candidate on the GPU
    open_document(client, TWICE, twice.as_uri())
    result = await optimize_twice(client, twice.as_uri())
    report = result["report"]
    assert report["gpu"] is False and report["unverified"] == "workspace not trusted"
    assert "none verified (workspace not trusted)" in result["summary"]
    assert not [line for line in gpu_log() if line.startswith(("optimize", "bench_rewrite"))], gpu_log()

    refreshed.clear()
    await trust(client, configuration)
    await asyncio.wait_for(refreshed.wait(), timeout=60)  # the trust lens is gone
    assert not [t for t in await lens_titles(client, path.as_uri()) if "not trusted" in t]
    save(client, path.as_uri())
    for _ in range(100):
        if "bench_file saxpy.cu" in gpu_log():
            break
        await asyncio.sleep(0.1)
    assert "bench_file saxpy.cu" in gpu_log(), "trusted, a save benchmarks the file"
    trusted = await optimize_twice(client, twice.as_uri())
    assert trusted["report"]["gpu"] is True and "optimize gpu_arch" in gpu_log(), "trusted, candidates go to the GPU"


def remote_code_model(sdar_dir: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A model folder whose own modeling code leaves a marker file when it runs; (folder, marker)."""
    folder = tmp_path / "remote-code-model"
    shutil.copytree(sdar_dir, folder)
    ran = tmp_path / "modeling code ran"
    (folder / "modeling_toy.py").write_text(
        f"open({str(ran)!r}, 'w').close()\n"
        "from transformers import Qwen3Config, Qwen3ForCausalLM\n"
        "class ToyConfig(Qwen3Config):\n    model_type = 'sdar'\n"
        "class ToySDAR(Qwen3ForCausalLM):\n    config_class = ToyConfig\n")
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "modeling_toy.ToyConfig", "AutoModelForCausalLM": "modeling_toy.ToySDAR"}
    (folder / "config.json").write_text(json.dumps(config))
    return folder, ran


async def test_untrusted_a_model_folders_own_code_never_runs(client: LanguageClient, sdar_dir: Path,
                                                              tmp_path: Path) -> None:
    folder, ran = remote_code_model(sdar_dir, tmp_path)
    configuration = {**FAST, "model": str(folder), "trustRemoteCode": True, "device": "cpu"}
    statuses = await start(client, configuration=configuration)
    assert (await ready(statuses, client))["state"] == "ready", "the folder loads natively instead"
    assert not ran.exists()
    [said] = trust_messages(client)
    assert "dice.trustRemoteCode has no effect" in said and "dice.trusted" in said
    loaded = len(statuses)
    await trust(client, configuration)
    await wait_status(statuses, "loading", after=loaded)
    assert (await wait_status(statuses, "ready", after=loaded))["state"] == "ready"
    assert ran.exists(), "trusted, the folder's modeling code is what runs"


async def test_a_nested_dice_object_cannot_trust_the_workspace(client: LanguageClient, sdar_dir: Path,
                                                               tmp_path: Path) -> None:
    """The bypass: an answer to workspace/configuration of `{trusted: false, dice: {trusted: true, ...}}` (a
    workspace's `"dice.dice": {...}`) made the server trusted, and it imported the folder's modeling code."""
    folder, ran = remote_code_model(sdar_dir, tmp_path)
    nested = {"trusted": True, "trustRemoteCode": True, "model": str(folder), "device": "cpu"}
    statuses = await start(client, options={"dice": {**FAST, "dice": nested}},
                           configuration={**FAST, "trusted": False, "dice": nested})
    status = await ready(statuses, client)
    assert status["state"] == "ready" and status["model"] == "dice-tiny", "the nested object named no model"
    shown = [m.message for m in client.messages]
    assert shown.count("dice.dice: not a setting (settings are not nested, except server.*; ignored)") == 2, shown
    await trust(client, {**FAST, "trust": {"remoteCode": True}, "include": {"dirs": ["/etc"]}, "dice": nested})
    await asyncio.sleep(1.0)  # the configuration is applied (trust waits for it): a model load would have started
    assert statuses[-1]["model"] == "dice-tiny" and not ran.exists()
    shown = [m.message for m in client.messages]
    assert "dice.trust: not a setting (settings are not nested, except server.*; ignored)" in shown
    assert "dice.include: not a setting (settings are not nested, except server.*; ignored)" in shown
