"""Train the embedded masked-diffusion model on the packed corpus, in time-boxed calls that resume.

    dice-lsp train --data data/pack --tokenizer data/tokenizer --out runs/tiny --steps 20000 --minutes 9
    dice-lsp train ... --resume runs/tiny          # the next call continues the same schedule
    dice-lsp train ... --objective ar              # the autoregressive fill-in-the-middle baseline
    dice-lsp train ... --init models/dice-tiny --layers 16 --run-minutes 21   # grow a trained model, time-boxed

The learning-rate schedule and the infilling curriculum follow the step count (`--steps` for the whole
run), so a run split over several calls is the same run, and a baseline trained for as many steps sees
the same schedule; with `--run-minutes` they follow the wall clock instead (a run that must end at a
given time, whatever the GPU's speed). `--init` starts from a trained checkpoint; with more `--layers`
than it has, each of its layers is followed by copies whose output projections are zero, so the grown
model computes exactly what the trained one did and training adds depth from there (block expansion).
A checkpoint is written at every validation and at the end: native folders whose
weights are bf16 safetensors shards small enough to bring back from a remote GPU machine.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from dice_lsp.engine.checkpoint import build_transformer, load_state, weights
from dice_lsp.engine.config import AttentionLayout, read_config
from dice_lsp.engine.presets import DICE_TINY
from dice_lsp.engine.quant import dequantize_state
from dice_lsp.engine.tokenizer import Tokenizer
from dice_lsp.engine.transformer import Transformer
from dice_lsp.training.holes import (
    Example,
    TokenTables,
    WindowSampler,
    fim_example,
    hole_example,
    make_example,
    window_span,
)
from dice_lsp.training.options import build_parser
from dice_lsp.training.packindex import INDEX_NAME, file_weights, parse_weights, read_index

if TYPE_CHECKING:
    from dice_lsp.training.rft import RftTokens

LOG = logging.getLogger("dice_lsp.train")
SHARD_BYTES = 15 * 1024**2
SEPARATOR = "<|file_sep|>"


def load_stream(data: Path, split: str) -> np.ndarray:
    files = sorted(data.glob(f"{split}-*.bin")) or sorted(data.glob(f"{split}.bin"))
    if not files:
        raise SystemExit(f"{data}: no {split} shards")
    return np.concatenate([np.fromfile(f, dtype=np.uint16) for f in files])


def gpu_tokens(data: Path) -> int:
    """How many tokens at the start of the train stream are GPU code (the pack writes it first)."""
    meta = data / "meta.json"
    if not meta.exists():
        return 0
    return int(json.loads(meta.read_text()).get("train", {}).get("tokens", {}).get("cuda", 0))


def weighted_sampler(data: Path, spec: str, size: int, length: int) -> WindowSampler:
    """The window sampler for `--weights SPEC` over the pack's per-file index; one-line SystemExit on a bad
    spec, a missing index, or an index that does not cover the `size` tokens of the train stream."""
    files = read_index(data)
    total = files[-1]["offset"] + files[-1]["length"] + 1 if files else 0
    if total != size:
        raise SystemExit(f"{data / INDEX_NAME}: covers {total} tokens, the train shards hold {size}")
    try:
        weights = file_weights(files, parse_weights(spec))
        sampler = WindowSampler.build(np.array([f["offset"] for f in files]), np.array([f["length"] for f in files]),
                                      weights, size, window_span(length))
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    shares = sampler.shares(np.array([f["dialect"] for f in files]))
    LOG.info("windows per dialect: %s", ", ".join(f"{k} {v:.1%}" for k, v in sorted(shares.items())))
    return sampler


def token_tables(tok: Tokenizer) -> TokenTables:
    pieces = [tok.decode([i]) for i in range(tok.vocab_size)]
    special = tok.special
    separator = tok.token_id(SEPARATOR)
    fim = (special.fim_prefix_id, special.fim_suffix_id, special.fim_middle_id)
    if None in fim:
        raise SystemExit(f"{tok.folder}: the tokenizer needs <|fim_prefix|>, <|fim_suffix|> and <|fim_middle|>")
    return TokenTables.from_vocab(pieces, special.mask_id, special.pad_id, special.eos_id,
                                  separator if separator is not None else special.eos_id, fim)  # type: ignore[arg-type]


def collate(examples: list[Example], device: torch.device) -> tuple[torch.Tensor, ...]:
    ids = torch.from_numpy(np.stack([e.ids for e in examples]))
    targets = torch.from_numpy(np.stack([e.targets for e in examples]))
    weights = torch.from_numpy(np.stack([e.weights for e in examples]))
    return tuple(t.to(device, non_blocking=True) for t in (ids, targets, weights))


class Batches(torch.utils.data.IterableDataset[list[Example]]):
    """Endless batches built in worker processes; `progress` (shared) steers the curriculum. With `rft`
    (kept fills, `dice_lsp.training.rft`), the first `rft_rows` examples of each batch are drawn from them."""

    def __init__(self, stream: np.ndarray, tables: TokenTables, batch: int, length: int, seed: int,
                 progress: Any, objective: str, gpu_end: int = 0, gpu_weight: float = 1.0,
                 sampler: WindowSampler | None = None, rft: list[RftTokens] | None = None,
                 rft_rows: int = 0) -> None:
        self.stream, self.tables, self.batch, self.length, self.seed = stream, tables, batch, length, seed
        self.progress, self.objective = progress, objective
        self.gpu_end, self.gpu_weight, self.sampler = gpu_end, gpu_weight, sampler
        self.rft, self.rft_rows = rft or [], rft_rows if rft else 0

    def __iter__(self) -> Iterator[list[Example]]:
        info = torch.utils.data.get_worker_info()
        rng = np.random.default_rng((self.seed, info.id if info else 0))
        while True:
            p = self.progress.value
            yield [*self._rft_examples(rng),
                   *(make_example(self.stream, self.length, p, self.tables, rng, self.objective,
                                  self.gpu_end, self.gpu_weight, self.sampler)
                     for _ in range(self.batch - self.rft_rows))]

    def _rft_examples(self, rng: np.random.Generator) -> Iterator[Example]:
        from dice_lsp.training.rft import rft_example

        made = 0
        while made < self.rft_rows:
            example = rft_example(self.rft[int(rng.integers(len(self.rft)))], self.length, self.tables, rng)
            if example is not None:  # `load_rft` keeps only fills that fit, so every draw gives one
                made += 1
                yield example


def rft_batches(args: argparse.Namespace, tok: Tokenizer) -> tuple[list[RftTokens] | None, int]:
    """`--rft FILE --rft-share S`: the kept fills in tokens and the rows of each batch made from them."""
    if not args.rft:
        return None, 0
    if args.objective != "diffusion":
        raise SystemExit("--rft: kept fills train the diffusion objective only")
    if not 0.0 < args.rft_share <= 1.0:
        raise SystemExit(f"--rft-share {args.rft_share}: give a share in (0, 1]")
    from dice_lsp.training.rft import load_rft

    items = load_rft(Path(args.rft), tok, args.length)
    rows = max(1, min(args.batch, round(args.batch * args.rft_share)))
    LOG.info("rft: %d kept fills from %s; %d of each batch of %d (share %.2f)", len(items), args.rft, rows,
             args.batch, rows / args.batch)
    return items, rows


def weighted_loss(model: Transformer, hidden_fn: Any, ids: torch.Tensor, targets: torch.Tensor,
                  weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Σ w·CE over masked positions / batch; the output head runs on masked positions only."""
    hidden = hidden_fn(ids)
    picked = weights > 0
    logits = model.lm_head(hidden[picked]).float()
    ce = F.cross_entropy(logits, targets[picked], reduction="none")
    loss = (ce * weights[picked]).sum() / ids.shape[0]
    accuracy = (logits.argmax(-1) == targets[picked]).float().mean()
    return loss, accuracy


def grow_depth(state: dict[str, torch.Tensor], old_layers: int, new_layers: int) -> dict[str, torch.Tensor]:
    """Weights for `new_layers` layers from a checkpoint of `old_layers`: layer j copies old layer
    j * old // new; every copy after the first of its group has zero attention-output and MLP-down
    projections, so it adds nothing to the residual stream until training moves it."""
    if new_layers < old_layers:
        raise SystemExit(f"--layers {new_layers}: cannot grow a {old_layers}-layer model into fewer layers")
    grown = {k: v for k, v in state.items() if not k.startswith("model.layers.")}
    previous = -1
    for j in range(new_layers):
        source = j * old_layers // new_layers
        prefix = f"model.layers.{source}."
        for name, tensor in state.items():
            if name.startswith(prefix):
                copy = tensor.clone()
                if source == previous and name.endswith(("self_attn.o_proj.weight", "mlp.down_proj.weight")):
                    copy.zero_()
                grown[f"model.layers.{j}.{name[len(prefix):]}"] = copy
        previous = source
    return grown


def validation_set(stream: np.ndarray, tables: TokenTables, length: int, count: int,
                   objective: str) -> list[Example]:
    """Fixed held-out one-line and multi-line holes; scored positions get weight > 0.

    Diffusion: the canvas fully masked, every canvas position scored. Autoregressive: the hole after
    `<|fim_middle|>` and its EOS scored (teacher-forced).
    """
    rng = np.random.default_rng(1234)
    examples: list[Example] = []
    while len(examples) < count:
        kind = "line" if len(examples) % 2 == 0 else "lines"
        offset = int(rng.integers(0, len(stream) - length - 300))
        window = stream[offset:offset + length + 256]
        if objective == "ar":
            example = fim_example(window, kind, length, tables, rng)
            if example is not None:
                after_middle = np.cumsum(example.ids == tables.fim_ids[2]) > 0
                example.weights = np.where(after_middle & (example.weights > 0), 1.0, 0.0).astype(np.float32)
        else:
            example = hole_example(window, kind, length, tables, rng)
            if example is not None:
                canvas = example.weights > 0
                example.ids[(example.ids != example.targets) | canvas] = tables.mask_id
                example.weights = canvas.astype(np.float32)
        if example is not None:
            examples.append(example)
    return examples


@torch.no_grad()
def evaluate(model: Transformer, examples: list[Example], tables: TokenTables,
             device: torch.device) -> dict[str, float]:
    """Loss (nats) over the scored positions; top-1 accuracy on the hole's own tokens (no pad/EOS)."""
    model.eval()
    ids, targets, weights = collate(examples, device)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        logits = model(ids).float()
    scored = weights > 0
    code = scored & (targets != tables.pad_id) & (targets != tables.eos_id)
    ce = F.cross_entropy(logits[scored], targets[scored])
    accuracy = (logits[code].argmax(-1) == targets[code]).float().mean()
    model.train()
    return {"val_nats": float(ce), "val_top1": float(accuracy)}


def lr_at(progress: float, peak: float, warmup: float) -> float:
    if progress < warmup:
        return peak * progress / warmup
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, (progress - warmup) / (1 - warmup)))))


def save_checkpoint(model: Transformer, tok: Tokenizer, out: Path, state: dict[str, Any]) -> None:
    """bf16 weights in shards under SHARD_BYTES, an index, config, tokenizer, and the training log."""
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("model-*.safetensors"):
        old.unlink()
    tensors = weights(model, torch.bfloat16)
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, tensor in tensors.items():
        nbytes = tensor.numel() * tensor.element_size()
        if shards[-1] and size + nbytes > SHARD_BYTES:
            shards.append({})
            size = 0
        shards[-1][name] = tensor
        size += nbytes
    weight_map = {}
    for index, shard in enumerate(shards):
        name = f"model-{index + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, str(out / name))
        weight_map.update(dict.fromkeys(shard, name))
    (out / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}, indent=1))
    (out / "config.json").write_text(json.dumps(model.config.to_json(), indent=2) + "\n")
    tok.save(out)
    (out / "train_log.json").write_text(json.dumps(state, indent=1))


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """The command-line settings worth recording in the training log."""
    return {k: v for k, v in vars(args).items() if isinstance(v, str | int | float | bool | None)}


def train(args: argparse.Namespace) -> dict[str, Any]:
    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    torch.manual_seed(args.seed)
    tok = Tokenizer(Path(args.tokenizer))
    tables = token_tables(tok)
    state: dict[str, Any] = {"minutes_done": 0.0, "step": 0, "tokens": 0, "log": [], "args": _settings(args)}
    attention: AttentionLayout = "causal" if args.objective == "ar" else "bidirectional"
    if args.resume:
        folder = Path(args.resume)
        cfg, _ = read_config(folder)
        model = build_transformer(cfg, load_state(folder), folder).float()
        state = json.loads((folder / "train_log.json").read_text())
        state["args"] = _settings(args)
    elif args.init:
        folder = Path(args.init)
        base, _ = read_config(folder)
        cfg = replace(base, num_hidden_layers=max(args.layers, base.num_hidden_layers), attention=attention)
        start = dequantize_state(load_state(folder))
        model = build_transformer(cfg, grow_depth(start, base.num_hidden_layers, cfg.num_hidden_layers),
                                  folder).float()
    else:
        cfg = replace(DICE_TINY, vocab_size=args.vocab or tok.vocab_size, hidden_size=args.hidden,
                      num_hidden_layers=args.layers, max_position_embeddings=args.length, attention=attention)
        if args.hidden != DICE_TINY.hidden_size:
            cfg = replace(cfg, intermediate_size=args.hidden * 11 // 4, num_attention_heads=max(1, args.hidden // 64),
                          num_key_value_heads=max(1, args.hidden // 128), head_dim=64)
        model = Transformer(cfg)
        model.init_weights(std=0.02)
    for layer in model.model.layers:
        layer.dropout = args.dropout
    model.to(device).train()
    LOG.info("model: %.1fM parameters on %s", cfg.num_parameters / 1e6, device)
    train_stream, valid_stream = load_stream(Path(args.data), "train"), load_stream(Path(args.data), "valid")
    if cfg.attention != attention:
        raise SystemExit(f"{args.resume}: a {cfg.attention} model cannot continue with --objective {args.objective}")
    val_examples = validation_set(valid_stream, tables, args.length, 256, args.objective)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=args.lr, betas=(0.9, 0.95), fused=device.type == "cuda")
    sampler = None
    if args.weights:
        if args.gpu_weight != 1.0:
            raise SystemExit("--weights and --gpu-weight: give one "
                             "(--weights cuda=W,hip=W,opencl=W weights all GPU code)")
        sampler = weighted_sampler(Path(args.data), args.weights, len(train_stream), args.length)
    rft, rft_rows = rft_batches(args, tok)
    if rft is not None:
        state["rft"] = {"file": args.rft, "fills": len(rft), "rows": rft_rows, "share": round(rft_rows / args.batch, 4)}
    hidden_fn = torch.compile(model.hidden_states) if args.compile else model.hidden_states
    progress = torch.multiprocessing.Value("d", state["step"] / args.steps)
    loader = torch.utils.data.DataLoader(
        Batches(train_stream, tables, args.batch, args.length, args.seed + state["step"], progress, args.objective,
                gpu_tokens(Path(args.data)), args.gpu_weight, sampler, rft, rft_rows),
        batch_size=None, num_workers=args.workers, prefetch_factor=4 if args.workers else None,
        persistent_workers=bool(args.workers))
    started = time.time()
    budget = args.minutes * 60
    last_eval = time.time()
    for examples in loader:
        elapsed = time.time() - started
        done = state["minutes_done"] + elapsed / 60
        if args.run_minutes:
            run_progress = done / args.run_minutes
            finished = elapsed > budget or run_progress >= 1.0
        else:
            run_progress = state["step"] / args.steps
            finished = elapsed > budget or state["step"] + 1 >= args.steps
        progress.value = min(1.0, max(run_progress, args.curriculum_from))
        lr = lr_at(min(1.0, run_progress), args.lr, args.warmup)
        for group in optimizer.param_groups:
            group["lr"] = lr
        ids, targets, weights = collate(examples, device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            loss, accuracy = weighted_loss(model, hidden_fn, ids, targets, weights)
        optimizer.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        state["step"] += 1
        state["tokens"] += ids.numel()
        if state["step"] % args.log_every == 0 or finished:
            entry = {"step": state["step"], "minutes": round(done, 3), "tokens": state["tokens"], "lr": lr,
                     "loss": float(loss.detach()), "masked_top1": float(accuracy),
                     "tokens_per_s": round(ids.numel() * args.log_every / max(1e-9, time.time() - last_eval))
                     if state["step"] % args.log_every == 0 else None}
            if rft is not None:
                entry["rft_share"] = round(rft_rows / args.batch, 4)
            validate = state["step"] % (args.log_every * 10) == 0 or finished
            if validate:
                entry.update(evaluate(model, val_examples, tables, device))
            state["log"].append(entry)
            LOG.info("%s", json.dumps(entry))
            if validate:
                save_checkpoint(model, tok, Path(args.out), {**state, "minutes_done": done})
            last_eval = time.time()
        if finished:
            break
    state["minutes_done"] += (time.time() - started) / 60
    save_checkpoint(model, tok, Path(args.out), state)
    return state


def main(argv: list[str] | None = None) -> int:
    """`python -m dice_lsp.training.train ...`: the same run as `dice-lsp train`, without the editor's imports
    (what a bare GPU machine runs)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args = build_parser(argparse.ArgumentParser(prog="python -m dice_lsp.training.train")).parse_args(argv)
    state = train(args)
    print(f"trained to step {state['step']} in {state['minutes_done']:.1f} min -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
