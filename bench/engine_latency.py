"""Engine latency with random weights: the embedded model's shape on the CPU, SDAR-8B's shape on a GPU.

    python bench/engine_latency.py cpu            # one completion, 64-token canvas, per sampler
    python bench/engine_latency.py gpu            # 128-token region, 1/2/4 tokens per step: the dynamic
                                                  # cache on/off and the CUDA-graph static step, next to
                                                  # transformers' generate() of the same weights
    python bench/engine_latency.py gpu --quick    # one timed run each, no uncached rows (< 3 min on an H200)

Prints a Markdown table (the rows of docs/PERFORMANCE.md); `--json FILE` keeps the raw numbers.

The floor of a step (`step_floor`, which bench/static_step_replay.py uses too) is the bytes a step must read
(`step_read_bytes`: every weight except the input embedding table, of which a step reads only its tokens' rows;
the whole table where the output head is tied to it) at the card's read bandwidth (`measure_read_bandwidth`: the
fastest of a few read-only passes over 2 GiB). Until 2026-12-07 the floor was every weight, the 1.245 GB table
included, at the device-to-device copy bandwidth (lower than the read bandwidth); that number is kept in the JSON
as `copy_floor_ms`, and its ratio as `graph_step_over_copy_floor`, for comparison with the older logs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from dice_lsp.engine.presets import DICE_TINY, SDAR_8B
from dice_lsp.engine.sampler_config import SamplerConfig
from dice_lsp.engine.sampling import Denoiser, fill_in_place, generate_blocks
from dice_lsp.engine.tokenizer import SpecialTokens
from dice_lsp.engine.transformer import Transformer

SPECIAL = SpecialTokens(mask_id=2, pad_id=0, eos_id=1)


def timed(fn: Callable[[], Any], repeats: int, device: torch.device) -> list[float]:
    """Wall-clock seconds per call after one warm-up; synchronises so GPU work is inside the timing."""
    fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return times


def cpu_rows(repeats: int, context: int, canvas: int) -> list[dict[str, Any]]:
    torch.manual_seed(0)
    model = Transformer(DICE_TINY).eval()
    model.init_weights()
    device = torch.device("cpu")
    samplers = {
        "low-confidence, 8 steps, full recompute": SamplerConfig(steps=8, context_cache=False),
        "low-confidence, 8 steps": SamplerConfig(steps=8),
        "low-confidence, 4 steps": SamplerConfig(steps=4),
        "threshold 0.9, <= 8 steps": SamplerConfig(strategy="threshold", steps=8),
        "blockwise 16 tokens x 2 steps": SamplerConfig(steps=2, block_length=16),
    }
    prefix = torch.randint(10, DICE_TINY.vocab_size, (context * 3 // 4,))
    suffix = torch.randint(10, DICE_TINY.vocab_size, (context // 4,))
    rows = []
    for name, sampler in samplers.items():
        calls: list[int] = []

        def run(sampler: SamplerConfig = sampler, calls: list[int] = calls) -> None:
            x = torch.cat((prefix, torch.full((canvas,), SPECIAL.mask_id), suffix))[None]
            denoiser = Denoiser(sampler, SPECIAL, device)
            fill_in_place(model, x, len(prefix), len(prefix) + canvas, denoiser)
            calls.append(denoiser.model_calls)

        times = timed(run, repeats, device)
        rows.append({"sampler": name, "tokens": context + canvas, "model_calls": calls[-1],
                     "p50_ms": statistics.median(times) * 1e3, "min_ms": min(times) * 1e3})
    return rows


ENGINE = "dice-lsp block diffusion"
PATHS = {  # row label -> (kv_cache column, generate_blocks' use_cache and step)
    ENGINE: ("yes", True, "dynamic"),
    f"{ENGINE} (uncached)": ("no", False, "dynamic"),
    f"{ENGINE}, CUDA graph": ("static", True, "graph"),
}


def gpu_rows(repeats: int, prompt_len: int, region: int,
             quick: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    device = torch.device("cuda")
    cfg = SDAR_8B
    hf_config = Qwen3Config(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads, head_dim=cfg.head_dim,
        max_position_embeddings=cfg.max_position_embeddings, rope_theta=cfg.rope_theta,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    with torch.device(device):
        reference = Qwen3ForCausalLM(hf_config).to(torch.bfloat16).eval()
    with torch.device("meta"):
        ours = Transformer(cfg)
    ours.load_state_dict(reference.state_dict(), assign=True)  # the same tensors: one copy of the weights
    ours.eval()
    prompt = torch.randint(10, cfg.vocab_size, (prompt_len,)).tolist()
    rows = []
    for per_step in (1, 2, 4):
        for engine, (kv_cache, use_cache, step) in PATHS.items():
            if quick and not use_cache:
                continue
            steps = cfg.block_size // per_step
            calls: list[int] = []

            def run(steps: int = steps, use_cache: bool = use_cache, step: Any = step,
                    calls: list[int] = calls) -> None:
                denoiser = Denoiser(SamplerConfig(steps=steps), SPECIAL, device)
                generate_blocks(ours, prompt, 1, region, denoiser, stop_ids=set(), use_cache=use_cache, step=step)
                calls.append(denoiser.model_calls)

            seconds = statistics.median(timed(run, repeats, device))  # the warm-up call captures the graph
            rows.append({"engine": engine, "tokens_per_step": per_step,
                         "kv_cache": kv_cache, "denoising_steps": calls[-1],
                         "ms_per_step": seconds * 1e3 / calls[-1], "ms_per_token": seconds * 1e3 / region,
                         "total_ms": seconds * 1e3})
    ids = torch.tensor([prompt], device=device)

    def generate() -> None:
        reference.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=region, min_new_tokens=region,
                           do_sample=False, pad_token_id=0)

    seconds = statistics.median(timed(generate, repeats, device))
    rows.append({"engine": "transformers generate (autoregressive)", "tokens_per_step": 1, "kv_cache": "yes",
                 "denoising_steps": region, "ms_per_step": seconds * 1e3 / region,
                 "ms_per_token": seconds * 1e3 / region, "total_ms": seconds * 1e3})
    props = torch.cuda.get_device_properties(device)
    floor = step_floor(ours, 2 * cfg.block_size, device)  # a graph step: ids [1, 2 * block] (block_graph)
    meta = {"gpu": props.name, **floor, "prompt_tokens": prompt_len, "region_tokens": region,
            "torch": torch.__version__, "repeats": repeats}
    meta.update(graph_targets(rows, floor["floor_ms_per_step"], floor["copy_floor_ms"]))
    return rows, meta


def graph_targets(rows: list[dict[str, Any]], floor_ms: float,
                  copy_floor_ms: float | None = None) -> dict[str, float]:
    """Issue 21's targets: a graph step at batch 1 within 1.5x the floor (`step_floor`'s `floor_ms_per_step`);
    4 tokens per step at least 6x faster per generated token than transformers' generate in the same run. With
    `copy_floor_ms` the slowest graph step's ratio to the legacy floor too (`graph_step_over_copy_floor`)."""
    graph = {row["tokens_per_step"]: row for row in rows if row["engine"] == f"{ENGINE}, CUDA graph"}
    generate = next(row for row in rows if row["engine"].startswith("transformers"))
    slowest = max(row["ms_per_step"] for row in graph.values())
    targets = {"graph_step_over_floor": slowest / floor_ms,
               "graph_4_per_step_speedup_vs_generate": generate["ms_per_token"] / graph[4]["ms_per_token"]}
    if copy_floor_ms is not None:
        targets["graph_step_over_copy_floor"] = slowest / copy_floor_ms
    return targets


# ---- the floor of a step ----

def _input_table(model: nn.Module) -> nn.Parameter:
    """The input embedding table: `get_input_embeddings()` (Hugging Face) or `model.embed_tokens` (ours)."""
    found: Any = model
    embedding = found.get_input_embeddings() if hasattr(found, "get_input_embeddings") else found.model.embed_tokens
    table = embedding.weight
    assert isinstance(table, nn.Parameter)
    return table


def step_read_bytes(model: nn.Module, tokens: int) -> dict[str, Any]:
    """The bytes one forward call over `tokens` token ids must read from the device's memory, by part.

    `weight_bytes`: every tensor of the model's state (parameters and persistent buffers, e.g. int8 weights and
    their scales), each once (a tied output head is the embedding table's own tensor). `step_read_bytes`: those
    less the input embedding table, of which the call reads `tokens` rows (`embedding_rows_bytes`), unless the
    output head is tied to the table: its product then reads the whole table, counted once, rows included.
    Activations, the key/value cache and the logits are not counted (a few percent of the weights at most).
    """
    seen: set[int] = set()
    weight_bytes = 0
    for tensor in model.state_dict(keep_vars=True).values():
        if id(tensor) not in seen:
            seen.add(id(tensor))
            weight_bytes += tensor.numel() * tensor.element_size()
    table = _input_table(model)
    head = getattr(getattr(model, "lm_head", None), "weight", None)
    tied = head is table
    table_bytes = table.numel() * table.element_size()
    rows_bytes = tokens * table.shape[1] * table.element_size()
    read = weight_bytes if tied else weight_bytes - table_bytes + rows_bytes
    return {"weight_bytes": weight_bytes, "embedding_table_bytes": table_bytes, "embedding_tied": tied,
            "step_tokens": tokens, "embedding_rows_bytes": 0 if tied else rows_bytes, "step_read_bytes": read}


def step_floor(model: nn.Module, tokens: int, device: torch.device) -> dict[str, Any]:
    """The floor of one forward call over `tokens` ids: `step_read_bytes` at the read bandwidth measured now
    (`floor_ms_per_step`), next to the legacy floor, every weight at the copy bandwidth (`copy_floor_ms`)."""
    counted = step_read_bytes(model, tokens)
    read_bw, method, by_method = measure_read_bandwidth(device)
    copy_bw = measure_copy_bandwidth(device)
    return {**counted, "read_bandwidth_GBps": read_bw / 1e9, "read_bandwidth_method": method,
            "read_bandwidth_GBps_by_method": {k: v / 1e9 for k, v in by_method.items()},
            "copy_bandwidth_GBps": copy_bw / 1e9,
            "floor_ms_per_step": counted["step_read_bytes"] / read_bw * 1e3,
            "copy_floor_ms": counted["weight_bytes"] / copy_bw * 1e3}


def measure_copy_bandwidth(device: torch.device) -> float:
    """Bytes per second of a large device-to-device copy, counting bytes read plus bytes written."""
    src = torch.empty(2 * 1024**3, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    seconds = statistics.median(timed(lambda: dst.copy_(src), 10, device))
    return 2 * src.numel() / seconds


try:
    import triton
    import triton.language as tl
except ImportError:  # torch's CPU wheel brings no Triton: torch's read pass alone
    triton = None
    tl = None

if triton is not None:
    @triton.jit  # type: ignore[untyped-decorator]
    def _read_kernel(src_ptr, partial_ptr, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
        # one program sums BLOCK int32 words of `src` to one partial: a read with 1/BLOCK of it written
        program = tl.program_id(0)
        offsets = program.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        tl.store(partial_ptr + program, tl.sum(tl.load(src_ptr + offsets), axis=0))

READ_BYTES = 2 * 1024**3
TRITON_READS = ((4096, 4), (8192, 8), (16384, 8))  # (int32 elements per program, warps)


def _read_passes(buffer: torch.Tensor) -> dict[str, Callable[[], Any]]:
    """Read-only passes over `buffer` (uint8, a multiple of 64 KiB): torch's float32 sum, and on CUDA with
    Triton, a kernel that sums each block of int32 words to one partial (writes 1/4096 of what it reads or less)."""
    words = buffer.view(torch.int32)
    passes: dict[str, Callable[[], Any]] = {"torch.sum float32": lambda: buffer.view(torch.float32).sum()}
    if buffer.device.type == "cuda" and triton is not None:
        for block, warps in TRITON_READS:
            partial = torch.empty(words.numel() // block, dtype=torch.int32, device=buffer.device)

            def run(block: int = block, warps: int = warps, partial: torch.Tensor = partial) -> None:
                _read_kernel[(partial.numel(),)](words, partial, BLOCK=block, num_warps=warps)

            passes[f"triton int32 blocks of {block}, {warps} warps"] = run
    return passes


def measure_read_bandwidth(device: torch.device, nbytes: int = READ_BYTES, runs: int = 10,
                           calls: int = 5) -> tuple[float, str, dict[str, float]]:
    """Bytes read per second by the fastest read-only pass over `nbytes` (`_read_passes`): per pass the median
    of `runs` timings of `calls` back-to-back calls (CUDA events on a GPU), after a warm-up (compiling) call.
    Returns the fastest rate, its pass's name and every pass's rate; a pass that fails is left out."""
    buffer = torch.zeros(nbytes, dtype=torch.uint8, device=device)
    rates: dict[str, float] = {}
    for name, run in _read_passes(buffer).items():
        try:
            run()
        except Exception as error:  # a pass that cannot run here (Triton's compiler, say) is left out
            print(f"read pass {name!r} left out: {type(error).__name__}: {str(error)[:200]}")
            continue
        seconds = []
        for _ in range(runs):
            if device.type == "cuda":
                start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
                start.record()
                for _ in range(calls):
                    run()
                end.record()
                end.synchronize()
                seconds.append(start.elapsed_time(end) / 1e3 / calls)
            else:
                began = time.perf_counter()
                for _ in range(calls):
                    run()
                seconds.append((time.perf_counter() - began) / calls)
        rates[name] = nbytes / statistics.median(seconds)
    del buffer
    best = max(rates, key=rates.__getitem__)
    return rates[best], best, rates


def markdown(rows: list[dict[str, Any]]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        lines.append("| " + " | ".join(f"{v:.1f}" if isinstance(v, float) else str(v) for v in row.values()) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", choices=["cpu", "gpu"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", help="write the raw numbers here")
    parser.add_argument("--quick", action="store_true", help="one timed run per row, no uncached rows")
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    if args.target == "cpu":
        rows, meta = cpu_rows(repeats, context=448, canvas=64), {"threads": torch.get_num_threads()}
    else:
        rows, meta = gpu_rows(repeats, prompt_len=512, region=128, quick=args.quick)
    print(json.dumps(meta))
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"meta": meta, "rows": rows}, handle, indent=2)


if __name__ == "__main__":
    main()
