"""Engine latency with random weights: the embedded model's shape on the CPU, SDAR-8B's shape on a GPU.

    python bench/engine_latency.py cpu            # one completion, 64-token canvas, per sampler
    python bench/engine_latency.py gpu            # 128-token region, 1/2/4 tokens per step: the dynamic
                                                  # cache on/off and the CUDA-graph static step, next to
                                                  # transformers' generate() of the same weights
    python bench/engine_latency.py gpu --quick    # one timed run each, no uncached rows (< 3 min on an H200)

Prints a Markdown table (the rows of docs/PERFORMANCE.md); `--json FILE` keeps the raw numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

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
    weight_bytes = sum(p.numel() * p.element_size() for p in reference.parameters())
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
    copy_bw = measure_copy_bandwidth(device)
    meta = {"gpu": props.name, "weight_bytes": weight_bytes, "copy_bandwidth_GBps": copy_bw / 1e9,
            "floor_ms_per_forward": weight_bytes / copy_bw * 1e3, "prompt_tokens": prompt_len,
            "region_tokens": region, "torch": torch.__version__, "repeats": repeats}
    meta.update(graph_targets(rows, meta["floor_ms_per_forward"]))
    return rows, meta


def graph_targets(rows: list[dict[str, Any]], floor_ms: float) -> dict[str, float]:
    """Issue 21's targets: a graph step at batch 1 within 1.5x the weight-read floor; 4 tokens per step
    at least 6x faster per generated token than transformers' generate in the same run."""
    graph = {row["tokens_per_step"]: row for row in rows if row["engine"] == f"{ENGINE}, CUDA graph"}
    generate = next(row for row in rows if row["engine"].startswith("transformers"))
    return {"graph_step_over_floor": max(row["ms_per_step"] for row in graph.values()) / floor_ms,
            "graph_4_per_step_speedup_vs_generate": generate["ms_per_token"] / graph[4]["ms_per_token"]}


def measure_copy_bandwidth(device: torch.device) -> float:
    """Bytes per second of a large device-to-device copy, counting bytes read plus bytes written."""
    src = torch.empty(2 * 1024**3, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    seconds = statistics.median(timed(lambda: dst.copy_(src), 10, device))
    return 2 * src.numel() / seconds


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
