"""A Qwen3-shaped transformer that serves both checkpoint families.

RMSNorm, rotary embeddings, SwiGLU and grouped-query attention with per-head q/k norms, with parameter
names identical to Hugging Face's Qwen3 so that SDAR/DICE safetensors load without renaming. The only
difference between the families is the attention layout: `bidirectional` (every position sees every
other: in-place masked infilling), `block` (bidirectional inside a block, causal across blocks, with a
cache of finished blocks' keys and values) or `causal` (blocks of one token: an autoregressive model).

Two caches: `KVCache` grows by concatenation (any layout, any call shape); `StaticKVCache` (block models)
is preallocated at a fixed length and written in place at the positions of each call, with attention over
the whole buffer under a block-causal mask built from those positions, so that a call's shapes depend on
its input alone and the same call can be captured once as a CUDA graph and replayed (`block_graph.py`).
That call (`static_forward`) runs each layer as fewer, larger kernels (`DecoderLayer.static`, `fused.py`):
fused q|k|v and gate|up products, q and k normalised and rotated together, residual adds inside the
output products.
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from dice_lsp.engine import step_kernels
from dice_lsp.engine.config import ModelConfig
from dice_lsp.engine.fused import (
    FUSE_LOCK,
    LayerWeights,
    NormTable,
    StepTables,
    apply_rotary,
    fuse_rows,
    head_norm_table,
    norm_heads,
)


def _fuses_norms(device: torch.device) -> bool:
    """Whether the static step runs its RMSNorms as `F.rms_norm` on `device` (bench/static_step_ops.py
    sets it on a CPU to count the CUDA form's operations)."""
    return device.type == "cuda"


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: Tensor, fused: bool = False) -> Tensor:
        if fused:  # one kernel instead of eight (the weight is applied before rounding to bf16)
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def rotary(positions: Tensor, head_dim: int, theta: float) -> tuple[Tensor, Tensor]:
    """cos/sin tables for the given absolute positions ([T], or [rows, T] where each row has its own), shape
    [T, head_dim] ([rows, T, head_dim])."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device).float() / head_dim))
    freqs = positions.float()[..., None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


class KVCache:
    """Keys and values of finished positions, one pair per layer; grows as blocks are committed.

    `stacked`, when set, holds every layer's keys and values as two tensors ([layers, rows, kv heads, length,
    head dim]) whose views the per-layer lists are: a static first call writes them so (`window_graph`), and
    selecting rows, dropping a window or copying the keys into a window step is then two operations instead
    of two per layer (on a GPU each is a kernel launch from Python).
    """

    def __init__(self, num_layers: int) -> None:
        self.keys: list[Tensor | None] = [None] * num_layers
        self.values: list[Tensor | None] = [None] * num_layers
        self.stacked: tuple[Tensor, Tensor] | None = None

    @classmethod
    def of_stacked(cls, keys: Tensor, values: Tensor) -> KVCache:
        """A cache whose layers are views of `keys`/`values` ([layers, rows, kv heads, length, head dim])."""
        cache = cls(keys.shape[0])
        cache._stack(keys, values)
        return cache

    def _stack(self, keys: Tensor, values: Tensor) -> None:
        self.stacked = (keys, values)
        self.keys, self.values = list(keys.unbind(0)), list(values.unbind(0))

    @property
    def length(self) -> int:
        k = self.keys[0]
        return 0 if k is None else int(k.shape[2])

    def extend(self, layer: int, k: Tensor, v: Tensor, keep: int) -> tuple[Tensor, Tensor]:
        """Keys/values to attend over: the cached ones followed by `k`/`v`; the first `keep` new ones stay."""
        old_k, old_v = self.keys[layer], self.values[layer]
        end = keep
        if old_k is not None and old_v is not None:
            end += old_k.shape[2]
            k, v = torch.cat((old_k, k), dim=2), torch.cat((old_v, v), dim=2)
        if keep:
            self.keys[layer], self.values[layer] = k[:, :, :end], v[:, :, :end]
            self.stacked = None
        return k, v

    def select(self, rows: Tensor) -> None:
        """Keep the rows `rows` (indices, repeats allowed): candidates that share a context share its keys."""
        if self.stacked is not None:
            self._stack(self.stacked[0].index_select(1, rows), self.stacked[1].index_select(1, rows))
            return
        for layer, (k, v) in enumerate(zip(self.keys, self.values, strict=True)):
            if k is not None and v is not None:
                self.keys[layer], self.values[layer] = k.index_select(0, rows), v.index_select(0, rows)

    def drop(self, lo: int, hi: int) -> None:
        """Forget cached positions lo..hi (a canvas whose tokens are about to change)."""
        if self.stacked is not None:
            self._stack(*(torch.cat((t[:, :, :, :lo], t[:, :, :, hi:]), dim=3) for t in self.stacked))
            return
        for layer, (k, v) in enumerate(zip(self.keys, self.values, strict=True)):
            if k is not None and v is not None:
                self.keys[layer] = torch.cat((k[:, :, :lo], k[:, :, hi:]), dim=2)
                self.values[layer] = torch.cat((v[:, :, :lo], v[:, :, hi:]), dim=2)


class StaticKVCache:
    """Keys and values of a block model at fixed addresses: [layers, rows, kv heads, max_len, head dim] each.

    Every call writes the keys/values of all its input positions at those positions (`index_copy_`, no
    growth) and attends over the whole buffer; the block-causal mask hides the later blocks, so positions
    that are not final yet (the block being denoised) or not written yet (beyond it) are never seen by an
    earlier block, and a later call overwrites them with their final tokens. The buffer starts at zeros so
    that hidden positions hold finite values (a masked key weighs exactly 0, a NaN value would not).
    `positions` is set by `Transformer.static_forward` for the call in progress.
    """

    def __init__(self, cfg: ModelConfig, rows: int, max_len: int, device: torch.device, dtype: torch.dtype) -> None:
        if cfg.attention != "block":
            raise ValueError(f"a static cache serves block models, not {cfg.attention!r} ones")
        if max_len > cfg.max_position_embeddings or max_len % cfg.block_size:
            raise ValueError(f"static cache length {max_len}: a multiple of the block size {cfg.block_size} "
                             f"within the window of {cfg.max_position_embeddings}")
        shape = (cfg.num_hidden_layers, rows, cfg.num_key_value_heads, max_len, cfg.head_dim)
        self.keys = torch.zeros(shape, device=device, dtype=dtype)
        self.values = torch.zeros(shape, device=device, dtype=dtype)
        self.rows, self.max_len, self.block_size = rows, max_len, cfg.block_size
        self.key_blocks = torch.arange(max_len, device=device) // cfg.block_size
        self.positions = torch.zeros(0, dtype=torch.long, device=device)
        self.valid: Tensor | None = None  # [rows, max_len] bool: the real columns of padded rows (`padded`)

    def padded(self) -> None:
        """Rows of a batch padded to one layout: the mask also hides each row's padding (`load_valid`)."""
        self.valid = torch.ones((self.rows, self.max_len), dtype=torch.bool, device=self.keys.device)

    def load_valid(self, valid: Tensor | None) -> None:
        """A generation's real columns ([≤ rows, ≤ max_len] bool; the rest count as real); None: no padding."""
        if self.valid is None:
            if valid is not None:
                raise ValueError("padded rows need a static cache made for them (`padded`)")
            return
        self.valid.fill_(True)
        if valid is not None:
            self.valid[:valid.shape[0], :valid.shape[1]].copy_(valid)

    def extend(self, layer: int, k: Tensor, v: Tensor, keep: int) -> tuple[Tensor, Tensor]:
        """Write `k`/`v` ([rows, heads, T, dim]) at `self.positions` (each row at its own where they are [rows,
        T]); the whole buffer is attended over."""
        if self.positions.dim() == 2:
            at = self.positions[:, None, :, None].expand_as(k)
            self.keys[layer].scatter_(2, at, k)
            self.values[layer].scatter_(2, at, v)
        else:
            self.keys[layer].index_copy_(2, self.positions, k)
            self.values[layer].index_copy_(2, self.positions, v)
        return self.keys[layer], self.values[layer]

    def mask(self) -> Tensor:
        """[T, max_len] bool: the query at each of `self.positions` sees the key blocks up to its own; with
        padded rows or positions per row ([rows, T]), [rows, 1, T, max_len], and a real query never sees
        padding (as `Attention.forward`)."""
        blocks = self.positions // self.block_size
        if self.positions.dim() == 2:
            allowed = self.key_blocks[None, None, :] <= blocks[:, :, None]
            if self.valid is None:
                return allowed[:, None]
            queries = self.valid.gather(1, self.positions)
            return (allowed & (self.valid[:, None, :] | ~queries[:, :, None]))[:, None]
        allowed = self.key_blocks[None, :] <= blocks[:, None]
        if self.valid is None:
            return allowed
        queries = self.valid.index_select(1, self.positions)
        return (allowed[None] & (self.valid[:, None, :] | ~queries[:, :, None]))[:, None]


class StepCache(Protocol):
    """What a static call writes its keys/values to and reads its mask from: a block model's `StaticKVCache`, or
    an in-place fill's window step over its context (`window_graph.WindowKeys`)."""

    rows: int
    positions: Tensor  # the call's positions, set by `Transformer.static_forward`

    def extend(self, layer: int, k: Tensor, v: Tensor, keep: int) -> tuple[Tensor, Tensor]: ...

    def mask(self) -> Tensor: ...


def block_causal_mask(start: int, length: int, block_size: int, device: torch.device) -> Tensor | None:
    """Boolean [length, start+length] mask: query block sees key blocks up to its own.

    None when every query may see every key (the input lies inside one block), decided without touching
    the device so that a decoding step never waits for the GPU.
    """
    if (start + length - 1) // block_size == start // block_size:
        return None
    q_block = torch.arange(start, start + length, device=device) // block_size
    k_block = torch.arange(0, start + length, device=device) // block_size
    return k_block[None, :] <= q_block[:, None]


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads, self.n_kv, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, self.n_kv * self.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, self.n_kv * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, cfg.hidden_size, bias=False)
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self._qkv: Tensor | None = None  # the static step's fused q|k|v weight (`static_weights`)
        self.qkv_int8: nn.Module | None = None  # q|k|v's int8 products as one (`quant.fuse_int8`)
        self._norm_table: NormTable | None = None

    def static_weights(self) -> tuple[Tensor, Tensor] | None:
        """The fused [q|k|v, hidden] weight and the q|k heads' norm table; None for unfusable (int8) layers."""
        self._qkv = fuse_rows((self.q_proj, self.k_proj, self.v_proj), self._qkv)
        if self._qkv is None:
            return None
        self._norm_table = head_norm_table(self.q_norm.weight, self.k_norm.weight, self.n_heads, self.n_kv,
                                           self._norm_table)
        return self._qkv, self._norm_table.table

    def static(self, x: Tensor, weights: LayerWeights, tables: StepTables, cache: StepCache,
               layer: int) -> Tensor:
        """The static step's attention before the output projection: [rows * T, heads * head dim].

        One product for q|k|v, one normalisation and one rotation for the q|k heads (`fused.py`).
        """
        b, t, _ = x.shape
        nh, nkv, hd = self.n_heads, self.n_kv, self.head_dim
        qkv = step_product(x.reshape(b * t, -1), weights.qkv).view(b, t, nh + 2 * nkv, hd)
        if tables.heads is not None:  # GPU, fp16/bf16: one Triton kernel (`StepTables.make`)
            qk = step_kernels.norm_rotate(qkv, nh + nkv, weights.qk_norm, *tables.heads, self.q_norm.eps)
        else:
            qk = tables.rotate(norm_heads(qkv[:, :, :nh + nkv], weights.qk_norm, self.q_norm.eps,
                                          tables.fused_norms))
        keys, values = cache.extend(layer, qk[:, :, nh:].transpose(1, 2), qkv[:, :, nh + nkv:].transpose(1, 2), 0)
        queries = qk[:, :, :nh].transpose(1, 2)
        if step_kernels.usable(queries, keys):  # GPU, fp16/bf16: one Triton kernel
            out = step_kernels.attention(queries, keys, values, tables.mask)
        else:
            out = F.scaled_dot_product_attention(queries, keys, values, attn_mask=tables.mask, enable_gqa=nkv != nh)
        return out.transpose(1, 2).reshape(b * t, nh * hd)

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor], mask: Tensor | bool | None,
                cache: KVCache | StepCache | None, layer: int, keep: int, valid_keys: Tensor | None) -> Tensor:
        b, t, _ = x.shape
        if self.qkv_int8 is not None:  # int8 products: q|k|v as one (`quant.fuse_int8`)
            qx, kx, vx = self.qkv_int8(x).split((self.n_heads * self.head_dim, self.n_kv * self.head_dim,
                                            self.n_kv * self.head_dim), dim=-1)
        else:
            qx, kx, vx = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = self.q_norm(qx.view(b, t, self.n_heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(kx.view(b, t, self.n_kv, self.head_dim)).transpose(1, 2)
        v = vx.view(b, t, self.n_kv, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
        if cache is not None:
            k, v = cache.extend(layer, k, v, keep)
        causal = mask is True  # `True`: plain causal attention of a sequence starting at 0 (the fast kernels)
        allowed = mask if isinstance(mask, Tensor) else None
        if valid_keys is not None:  # rows of a batch padded to one length: padding is never attended by real
            # tokens; a padding query sees every key its layout allows (its output is never read, and one that
            # saw nothing, a block of padding under a block mask, would be NaN)
            padding = valid_keys[:, None, None, :] | ~valid_keys[:, None, -t:, None]
            allowed = padding if allowed is None else allowed & padding
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, is_causal=causal and valid_keys is None,
                                             enable_gqa=self.n_kv != self.n_heads)
        projected: Tensor = self.o_proj(out.transpose(1, 2).reshape(b, t, -1))
        return projected


def step_product(x: Tensor, weight: Tensor) -> Tensor:
    """x [rows, K] times weight [N, K]ᵀ in the static step: `step_kernels.product` where it serves (a GPU)."""
    if step_kernels.product_usable(x, weight):
        return step_kernels.product(x, weight)
    return F.linear(x, weight)


def add_step_product(stream: Tensor, x: Tensor, weight: Tensor) -> None:
    """stream [rows, N] += x [rows, K] times weight [N, K]ᵀ, rounded once (the residual's output and down
    projections)."""
    if step_kernels.product_usable(x, weight):
        step_kernels.product(x, weight, stream, accumulate=True)
    else:
        stream.addmm_(x, weight.t())


class MLP(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        self._gate_up: Tensor | None = None  # the static step's fused gate|up weight
        self.gate_up_int8: nn.Module | None = None  # gate|up's int8 products as one (`quant.fuse_int8`)

    def static_weights(self) -> Tensor | None:
        """The fused [gate|up, hidden] weight (made once, `fused.fuse_rows`); None for int8 layers."""
        self._gate_up = fuse_rows((self.gate_proj, self.up_proj), self._gate_up)
        return self._gate_up

    def static(self, x: Tensor, gate_up: Tensor) -> Tensor:
        """SwiGLU before the down projection: one product for gate|up, then silu and the product."""
        both = step_product(x.reshape(-1, x.shape[-1]), gate_up)
        if step_kernels.elementwise_usable(both):  # GPU, fp16/bf16: one Triton kernel
            return step_kernels.swiglu(both)
        gate, up = both.chunk(2, dim=-1)
        return F.silu(gate) * up

    def forward(self, x: Tensor) -> Tensor:
        if self.gate_up_int8 is not None:  # int8 products: gate|up as one (`quant.fuse_int8`)
            gate, up = self.gate_up_int8(x).chunk(2, dim=-1)
        else:
            gate, up = self.gate_proj(x), self.up_proj(x)
        out: Tensor = self.down_proj(F.silu(gate) * up)
        return out


class DecoderLayer(nn.Module):
    dropout = 0.0  # residual dropout while training (the autoregressive baseline's regulariser); never in eval

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x: Tensor, rope: tuple[Tensor, Tensor], mask: Tensor | bool | None,
                cache: KVCache | StepCache | None, layer: int, keep: int, valid_keys: Tensor | None) -> Tensor:
        attended = self.self_attn(self.input_layernorm(x), rope, mask, cache, layer, keep, valid_keys)
        if self.dropout and self.training:
            attended = F.dropout(attended, self.dropout, training=True)
        x = x + attended
        mixed = self.mlp(self.post_attention_layernorm(x))
        if self.dropout and self.training:
            mixed = F.dropout(mixed, self.dropout, training=True)
        out: Tensor = x + mixed
        return out

    def static(self, x: Tensor, weights: LayerWeights, tables: StepTables, cache: StepCache,
               layer: int) -> None:
        """The static step of this layer, adding both residual branches to `x` in place: the output and
        down projections are products that accumulate into the residual stream (`addmm_`, no separate add)."""
        b, t, d = x.shape
        stream = x.view(b * t, d)
        add_step_product(stream, self.self_attn.static(self.input_layernorm(x, tables.fused_norms), weights, tables,
                                                       cache, layer), self.self_attn.o_proj.weight)
        mixed = self.mlp.static(self.post_attention_layernorm(x, tables.fused_norms), weights.gate_up)
        add_step_product(stream, mixed.view(b * t, -1), self.mlp.down_proj.weight)


class Backbone(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class Transformer(nn.Module):
    """Token ids in, logits out, for every position (no shift: position i predicts token i)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.model = Backbone(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def new_cache(self) -> KVCache:
        return KVCache(self.config.num_hidden_layers)

    def new_static_cache(self, rows: int, max_len: int) -> StaticKVCache:
        weight = self.model.embed_tokens.weight  # an embedding: never an int8 layer
        return StaticKVCache(self.config, rows, max_len, weight.device, weight.dtype)

    def forward(self, ids: Tensor, start: int = 0, cache: KVCache | None = None, keep: int = 0,
                only: slice | None = None, valid_keys: Tensor | None = None) -> Tensor:
        """Logits for `ids` placed at absolute positions start..start+T-1.

        With a cache the new positions attend to the cached ones and to each other (block layout permitting;
        block models need `start` to equal the cached length, bidirectional ones attend to whatever context
        is cached); the keys/values of the first `keep` of them stay in the cache.
        `only` selects the input columns whose logits are wanted (the output head is the costliest layer
        of a small model, and a denoising step needs it for the canvas alone). `valid_keys` ([B, keys] bool,
        cached keys first) marks the real tokens of rows padded to a common length (bidirectional and
        block-diffusion batches; `causal` decoding never pads).
        """
        x = self.hidden_states(ids, start, cache, keep, valid_keys)
        if only is not None:
            x = x[:, only]
        logits: Tensor = self.lm_head(x)
        return logits

    def static_weights(self) -> list[LayerWeights] | None:
        """Every layer's fused weights for the static step, made on the first call (on the weights' device)
        and after a weight stopped being a view of them; None when the linear layers are int8."""
        with FUSE_LOCK:
            fused = []
            for layer in self.model.layers:
                assert isinstance(layer, DecoderLayer)
                attention, gate_up = layer.self_attn.static_weights(), layer.mlp.static_weights()
                if attention is None or gate_up is None:
                    return None
                fused.append(LayerWeights(attention[0], attention[1], gate_up))
            return fused

    @torch.no_grad()
    def static_forward(self, ids: Tensor, positions: Tensor, cache: StepCache, only: slice | Tensor) -> Tensor:
        """Logits of the columns `only` of `ids` ([rows, T]) placed at `positions` ([T] long, on the device; [rows,
        T]: each row at its own, a block cache's rows at different blocks); `only` as a tensor of column indices
        (on the device) lets a replayed call pick other columns.

        Static shapes: everything here depends on the shapes of `ids` and `cache` alone (no host value of
        the positions), so one call can be captured as a CUDA graph and replayed with new ids/positions
        copied into the same tensors. Keys/values of every input position are written to the cache.
        On CUDA the RMSNorms run fused (`F.rms_norm`: bf16 rounds once, after the weight, where the other
        paths round before it, as Hugging Face's Qwen3 does); on a CPU this is the other paths' arithmetic.
        The layers run with fused weights and shared tables (`fused.py`, `DecoderLayer.static`): the same
        arithmetic up to the order of additions and where bf16 rounds (the output and down projections add
        to the residual before rounding, the rotation rounds once).
        """
        if ids.shape[0] != cache.rows:
            raise ValueError(f"{ids.shape[0]} rows for a static cache of {cache.rows}")
        return self.static_body(ids, positions, cache, only, self.static_weights())

    def static_body(self, ids: Tensor, positions: Tensor, cache: StepCache, only: slice | Tensor,
                    fused: list[LayerWeights] | None) -> Tensor:
        """`static_forward` after its checks, given the fused weights: no locks and no host-side state, so
        `torch.compile` traces it as one graph (bench/static_step_replay.py --compile: no faster on an H100)."""
        cache.positions = positions
        dtype = self.model.embed_tokens.weight.dtype  # the tables converted once, not in every layer
        cos, sin = (t.to(dtype) for t in rotary(positions, self.config.head_dim, self.config.rope_theta))
        fused_norms = _fuses_norms(ids.device)
        x = self.model.embed_tokens(ids)
        if fused is None:  # int8 layers: the layers' own forward (q and k are [rows, heads, T, dim] there)
            rope = (cos, sin) if positions.dim() == 1 else (cos[:, None], sin[:, None])
            for i, layer in enumerate(self.model.layers):
                x = layer(x, rope, cache.mask(), cache, i, 0, None)
        else:
            tables = StepTables.make(cache.mask(), cos, sin, ids.shape[0], fused_norms)
            for i, (layer, weights) in enumerate(zip(self.model.layers, fused, strict=True)):
                assert isinstance(layer, DecoderLayer)
                layer.static(x, weights, tables, cache, i)
        picked = x.index_select(1, only) if isinstance(only, Tensor) else x[:, only]
        normed = self.model.norm(picked, fused_norms)
        if not isinstance(self.lm_head, nn.Linear):  # int8 (`quant`)
            logits: Tensor = self.lm_head(normed)
            return logits
        return step_product(normed.reshape(-1, normed.shape[-1]), self.lm_head.weight).view(*normed.shape[:-1], -1)

    def hidden_states(self, ids: Tensor, start: int = 0, cache: KVCache | None = None, keep: int = 0,
                      valid_keys: Tensor | None = None) -> Tensor:
        """Final normalised hidden states; training applies the output head to masked positions only."""
        cfg = self.config
        if cfg.attention != "bidirectional" and cache is not None and cache.length != start:
            raise ValueError(f"cache holds {cache.length} positions but the input starts at {start}")
        t = ids.shape[1]
        if start + t > cfg.max_position_embeddings:
            raise ValueError(f"{start + t} positions exceed the model window of {cfg.max_position_embeddings}")
        positions = torch.arange(start, start + t, device=ids.device)
        rope = rotary(positions, cfg.head_dim, cfg.rope_theta)
        mask: Tensor | bool | None = None
        if cfg.attention == "block":
            mask = block_causal_mask(start, t, cfg.block_size, ids.device)
        elif cfg.attention == "causal":
            mask = True if start == 0 else block_causal_mask(start, t, 1, ids.device)
        x = self.model.embed_tokens(ids)
        for i, layer in enumerate(self.model.layers):
            x = layer(x, rope, mask, cache, i, keep, valid_keys)
        normed: Tensor = self.model.norm(x)
        return normed

    def init_weights(self, std: float = 0.02, generator: torch.Generator | None = None) -> None:
        """Random initialisation (training from scratch, random-weight benchmarks and tests)."""
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(p)
            else:
                nn.init.normal_(p, mean=0.0, std=std, generator=generator)
