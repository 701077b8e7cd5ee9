"""Llama-architecture decoder in plain PyTorch with a paged KV cache.

Numerics follow transformers' LlamaForCausalLM (RMSNorm in float32, non-interleaved rotary with
float32 inverse frequencies, SiLU-gated MLP) so that logits match it for the same weights.
Parameter names follow HF as well, which makes checkpoint I/O a plain state_dict mapping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

SUPPORTED_MODEL_TYPES = ("llama", "mistral")
SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM")
_LLAMA3_ROPE_KEYS = ("factor", "low_freq_factor", "high_freq_factor",
                     "original_max_position_embeddings")


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ModelConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    max_position_embeddings: int
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None
    tie_word_embeddings: bool = False
    head_dim: int | None = None
    bos_token_id: int | None = None
    eos_token_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                     "num_attention_heads", "num_key_value_heads", "max_position_embeddings"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"model config field {name} must be a positive int, got {value!r}")
        if self.num_attention_heads % self.num_key_value_heads != 0:
            raise ValueError(
                f"model config: num_attention_heads ({self.num_attention_heads}) must be divisible "
                f"by num_key_value_heads ({self.num_key_value_heads})")
        if not self.rms_norm_eps > 0 or not self.rope_theta > 0:
            raise ValueError("model config: rms_norm_eps and rope_theta must be positive")
        object.__setattr__(self, "head_dim", self._checked_head_dim())
        object.__setattr__(self, "rope_scaling", _normalize_rope_scaling(
            self.rope_scaling, self.max_position_embeddings))
        object.__setattr__(self, "eos_token_ids", tuple(int(t) for t in self.eos_token_ids))
        for name, ids in (("bos_token_id", () if self.bos_token_id is None
                           else (self.bos_token_id,)), ("eos_token_ids", self.eos_token_ids)):
            if any(not 0 <= t < self.vocab_size for t in ids):
                raise ValueError(f"model config field {name} ({ids}) is outside the vocabulary "
                                 f"(vocab_size {self.vocab_size})")

    def _checked_head_dim(self) -> int:
        head_dim = self.head_dim
        if head_dim is None:
            if self.hidden_size % self.num_attention_heads != 0:
                raise ValueError(
                    f"model config: hidden_size ({self.hidden_size}) is not divisible by "
                    f"num_attention_heads ({self.num_attention_heads}); set head_dim explicitly")
            head_dim = self.hidden_size // self.num_attention_heads
        if head_dim <= 0 or head_dim % 2 != 0:
            raise ValueError(f"model config field head_dim must be a positive even int (rotary "
                             f"embeddings rotate pairs), got {head_dim}")
        return head_dim

    @property
    def resolved_head_dim(self) -> int:
        assert self.head_dim is not None  # always set by __post_init__
        return self.head_dim

    @property
    def num_queries_per_kv(self) -> int:
        return self.num_attention_heads // self.num_key_value_heads

    @classmethod
    def from_hf_dict(cls, d: dict[str, Any]) -> ModelConfig:
        """Builds a config from a HF config.json (LlamaConfig, transformers 4.x or 5.x layout)."""
        _check_supported_architecture(d)
        missing = [k for k in ("vocab_size", "hidden_size", "intermediate_size",
                               "num_hidden_layers", "num_attention_heads") if k not in d]
        if missing:
            raise ValueError(f"config.json is missing required field(s): {', '.join(missing)}")
        rope_theta, rope_scaling = _parse_hf_rope(d)
        eos = d.get("eos_token_id")
        eos_ids = () if eos is None else (eos,) if isinstance(eos, int) else tuple(eos)
        return cls(
            vocab_size=d["vocab_size"],
            hidden_size=d["hidden_size"],
            intermediate_size=d["intermediate_size"],
            num_hidden_layers=d["num_hidden_layers"],
            num_attention_heads=d["num_attention_heads"],
            num_key_value_heads=d.get("num_key_value_heads") or d["num_attention_heads"],
            max_position_embeddings=d.get("max_position_embeddings", 2048),
            rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),  # LlamaConfig's default
            rope_theta=rope_theta,
            rope_scaling=rope_scaling,
            tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
            head_dim=d.get("head_dim"),
            bos_token_id=d.get("bos_token_id"),
            eos_token_ids=eos_ids,
        )

    def to_hf_dict(self) -> dict[str, Any]:
        """A config.json that transformers' LlamaConfig / LlamaForCausalLM loads."""
        eos_ids = list(self.eos_token_ids)
        eos: int | list[int] | None = None if not eos_ids else eos_ids[0] if len(eos_ids) == 1 \
            else eos_ids  # LlamaConfig accepts both; a single id is the common form
        return {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.resolved_head_dim,
            "max_position_embeddings": self.max_position_embeddings,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "rope_scaling": None if self.rope_scaling is None else dict(self.rope_scaling),
            "tie_word_embeddings": self.tie_word_embeddings,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": eos,
            "hidden_act": "silu",
            "attention_bias": False,
            "mlp_bias": False,
            "initializer_range": 0.02,
            "use_cache": True,
            "torch_dtype": "float32",
        }


def _check_supported_architecture(d: dict[str, Any]) -> None:
    model_type = d.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(f"config.json: model_type {model_type!r} is not supported "
                         f"(supported: {', '.join(SUPPORTED_MODEL_TYPES)})")
    unsupported = [a for a in d.get("architectures") or [] if a not in SUPPORTED_ARCHITECTURES]
    if unsupported:
        raise ValueError(f"config.json: architecture {unsupported[0]!r} is not supported "
                         f"(supported: {', '.join(SUPPORTED_ARCHITECTURES)})")
    checks = {"hidden_act": "silu", "attention_bias": False, "mlp_bias": False}
    for key, expected in checks.items():
        if d.get(key, expected) != expected:
            raise ValueError(f"config.json: {key}={d[key]!r} is not supported "
                             f"(only {expected!r})")
    if d.get("quantization_config"):
        raise ValueError("config.json: quantized checkpoints (quantization_config) are not "
                         "supported")
    window = d.get("sliding_window")
    if window is not None and window < d.get("max_position_embeddings", 0):
        raise ValueError(f"config.json: sliding_window={window} is not supported "
                         "(sliding-window attention is not implemented)")


def _parse_hf_rope(d: dict[str, Any]) -> tuple[float, dict[str, Any] | None]:
    """Returns (rope_theta, rope_scaling) from either the 4.x keys (rope_theta + rope_scaling)
    or the 5.x key rope_parameters (which carries rope_theta inside)."""
    params = d.get("rope_parameters")
    if isinstance(params, dict) and params:
        theta = float(params.get("rope_theta", d.get("rope_theta", 10000.0)))
        scaling: dict[str, Any] | None = {k: v for k, v in params.items()
                                          if k not in ("rope_theta", "partial_rotary_factor")}
    else:
        theta = float(d.get("rope_theta", 10000.0))
        scaling = d.get("rope_scaling")
    if d.get("partial_rotary_factor", 1.0) != 1.0 or (
            isinstance(params, dict) and params.get("partial_rotary_factor", 1.0) != 1.0):
        raise ValueError("config.json: partial_rotary_factor != 1 is not supported")
    return theta, scaling


def _normalize_rope_scaling(scaling: dict[str, Any] | None,
                            max_position_embeddings: int) -> dict[str, Any] | None:
    """None for plain RoPE, else a validated llama3 dict with all four keys."""
    if scaling is None:
        return None
    if not isinstance(scaling, dict):
        raise ValueError(f"model config field rope_scaling must be a dict or None, got {scaling!r}")
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type == "default":
        return None
    if rope_type != "llama3":
        raise ValueError(f"model config field rope_scaling: rope_type {rope_type!r} is not "
                         "supported (only 'llama3' or none)")
    out = {k: v for k, v in scaling.items() if k != "type"}
    out["rope_type"] = "llama3"
    out.setdefault("original_max_position_embeddings", max_position_embeddings)  # as HF does
    missing = [k for k in _LLAMA3_ROPE_KEYS if k not in out]
    if missing:
        raise ValueError("model config field rope_scaling (llama3) is missing "
                         f"{', '.join(missing)}")
    if out["high_freq_factor"] == out["low_freq_factor"] or out["factor"] <= 0:
        raise ValueError("model config field rope_scaling (llama3): need factor > 0 and "
                         "high_freq_factor != low_freq_factor")
    return out


def _builtin(hidden: int, intermediate: int, layers: int, heads: int, max_pos: int) -> ModelConfig:
    # Byte-level vocabulary: 256 bytes + BOS 256, EOS 257, PAD 258, rest reserved.
    return ModelConfig(vocab_size=264, hidden_size=hidden, intermediate_size=intermediate,
                       num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=4,
                       max_position_embeddings=max_pos, bos_token_id=256, eos_token_ids=(257,))


BUILTIN_MODELS: dict[str, ModelConfig] = {
    "tiny": _builtin(hidden=256, intermediate=688, layers=4, heads=8, max_pos=2048),
    "small": _builtin(hidden=768, intermediate=2048, layers=12, heads=12, max_pos=4096),
}


# --------------------------------------------------------------------------------------------
# Attention metadata and its per-step preparation
# --------------------------------------------------------------------------------------------

@dataclass(slots=True)
class AttentionMetadata:
    """Describes one engine step's flat batch: num_seqs sequences, each contributing query_len new
    tokens (a prefill chunk or 1 decode token), concatenated into num_tokens = sum(query_lens)."""
    query_start_loc: Tensor  # int64 [num_seqs + 1], cumulative query lens, starts at 0
    seq_lens: Tensor         # int64 [num_seqs], KV length of each seq after this step's tokens
    slot_mapping: Tensor     # int64 [num_tokens], block_id * block_size + offset of each new token
    block_tables: Tensor     # int64 [num_seqs, max_num_blocks_per_seq], padded with 0
    max_query_len: int
    max_seq_len: int


class _GatherWorkspace:
    """Reusable CPU output buffers for the per-layer K/V gathers.

    A fresh multi-MB CPU tensor faults in new pages on every allocation, which costs more than
    the gather itself (decode at batch 32 ran ~3x slower). Buffers grow to the largest gather
    seen and are only reused when autograd is off, as every layer overwrites them.
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple[int, torch.dtype, bool], Tensor] = {}

    def buffer(self, slot: int, num_rows: int, like: Tensor) -> Tensor | None:
        """A [num_rows, like.shape[1]] buffer for gather `slot` (0: K, 1: V), or None when
        reuse is unsafe or pointless (autograd on, or a GPU whose allocator caches anyway)."""
        if like.device.type != "cpu" or torch.is_grad_enabled():
            return None
        numel = num_rows * like.shape[1]
        key = (slot, like.dtype, torch.is_inference_mode_enabled())
        buf = self._buffers.get(key)
        if buf is None or buf.numel() < numel:
            buf = self._buffers[key] = torch.empty(numel, dtype=like.dtype)
        return buf[:numel].view(num_rows, like.shape[1])


@dataclass(slots=True)
class _PagedBatch:
    """Layer-independent tensors derived once per forward from AttentionMetadata."""
    slot_mapping: Tensor
    block_tables: Tensor       # [num_seqs, num_blocks_used], trimmed to cover max_seq_len
    mask: Tensor               # additive (0 / -inf), broadcastable to [seqs, kv_heads, rows, keys]
    is_decode: bool            # every sequence has exactly one query token
    token_seq_idx: Tensor      # [num_tokens] sequence of each flat token (general path)
    token_query_pos: Tensor    # [num_tokens] index of each flat token within its query
    num_seqs: int
    max_query_len: int
    workspace: _GatherWorkspace
    token_idx: Tensor | None = None   # this group's rows of the flat batch (None: all, in order)


@dataclass(slots=True)
class _PagedStep:
    """One forward's attention plan: where new K/V go, and the groups attended separately.

    A step mixing decodes (1 query each) with prefill chunks (many queries) is split in
    two groups, so decode rows are not padded to the longest prefill chunk; the projections
    and MLP still run once over all tokens.
    """
    slot_mapping: Tensor
    groups: list[_PagedBatch]


def _additive_mask(allowed: Tensor, dtype: torch.dtype) -> Tensor:
    """Bool mask -> 0 / -inf in `dtype`, once per forward instead of inside every SDPA call."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(
        ~allowed, float("-inf"))


def _prepare_step(meta: AttentionMetadata, block_size: int, num_queries_per_kv: int,
                  dtype: torch.dtype, workspace: _GatherWorkspace) -> _PagedStep:
    def group(m: AttentionMetadata) -> _PagedBatch:
        return _prepare_paged_batch(m, block_size, num_queries_per_kv, dtype, workspace)

    keys = _group_keys(meta, block_size)
    distinct = torch.unique(keys)
    if distinct.numel() == 1:
        return _PagedStep(meta.slot_mapping, [group(meta)])
    query_lens = meta.query_start_loc[1:] - meta.query_start_loc[:-1]
    groups = []
    for key in distinct.tolist():
        sub, token_idx = _sub_metadata(meta, query_lens, (keys == key).nonzero().squeeze(1))
        batch = group(sub)
        batch.token_idx = token_idx
        groups.append(batch)
    return _PagedStep(meta.slot_mapping, groups)


def _group_keys(meta: AttentionMetadata, block_size: int) -> Tensor:
    """Which attention group each sequence joins.

    A group's K/V gather and attention are padded to its longest context (and, for prefill,
    its longest query), so sequences are grouped by shape: every prefill chunk in one group,
    and decodes by the power of two of their context in blocks. Padding waste then stays
    under 2x, where one group over lognormal contexts wasted about 3x.
    """
    query_lens = meta.query_start_loc[1:] - meta.query_start_loc[:-1]
    num_blocks = (meta.seq_lens + block_size - 1) // block_size
    decode_keys = torch.ceil(torch.log2(num_blocks.clamp(min=1).double())).long()
    return torch.where(query_lens == 1, decode_keys, torch.full_like(decode_keys, -1))


def _sub_metadata(meta: AttentionMetadata, query_lens: Tensor,
                  seq_idx: Tensor) -> tuple[AttentionMetadata, Tensor]:
    """The metadata of a subset of sequences, and the flat-batch rows of their tokens."""
    sub_lens = query_lens[seq_idx]
    sub_start = torch.zeros(seq_idx.shape[0] + 1, dtype=sub_lens.dtype, device=sub_lens.device)
    torch.cumsum(sub_lens, 0, out=sub_start[1:])
    num_tokens = int(sub_start[-1])
    offsets = torch.arange(num_tokens, device=sub_lens.device) - torch.repeat_interleave(
        sub_start[:-1], sub_lens, output_size=num_tokens)
    token_idx = torch.repeat_interleave(meta.query_start_loc[seq_idx], sub_lens,
                                        output_size=num_tokens) + offsets
    seq_lens = meta.seq_lens[seq_idx]
    sub = AttentionMetadata(sub_start, seq_lens, meta.slot_mapping[token_idx],
                            meta.block_tables[seq_idx], int(sub_lens.max()), int(seq_lens.max()))
    return sub, token_idx


def _prepare_paged_batch(meta: AttentionMetadata, block_size: int, num_queries_per_kv: int,
                         dtype: torch.dtype, workspace: _GatherWorkspace) -> _PagedBatch:
    num_seqs = meta.seq_lens.shape[0]
    num_blocks_used = max(1, -(-meta.max_seq_len // block_size))
    block_tables = meta.block_tables[:, :num_blocks_used]
    kv_len = block_tables.shape[1] * block_size
    device = meta.seq_lens.device
    key_pos = torch.arange(kv_len, device=device)
    empty = meta.seq_lens.new_empty(0)
    if meta.max_query_len == 1:
        mask = _additive_mask((key_pos[None, :] < meta.seq_lens[:, None])[:, None, None, :],
                              dtype)
        return _PagedBatch(meta.slot_mapping, block_tables, mask, True, empty, empty,
                           num_seqs, 1, workspace)
    query_lens = meta.query_start_loc[1:] - meta.query_start_loc[:-1]
    num_tokens = meta.slot_mapping.shape[0]
    token_seq_idx = torch.repeat_interleave(torch.arange(num_seqs, device=device), query_lens,
                                            output_size=num_tokens)
    token_query_pos = torch.arange(num_tokens, device=device) - meta.query_start_loc[token_seq_idx]
    # Query i of a sequence sees keys 0 .. (seq_len - query_len + i). Padded query rows
    # (i >= query_len) see a superset; their outputs are dropped, and no row is fully masked.
    num_context = (meta.seq_lens - query_lens)[:, None, None]
    query_pos = torch.arange(meta.max_query_len, device=device)[None, :, None]
    mask = key_pos[None, None, :] <= num_context + query_pos   # [num_seqs, max_q, kv_len]
    # Rows are laid out (group member, query position) to match _pad_queries.
    mask = _additive_mask(mask.repeat(1, num_queries_per_kv, 1)[:, None], dtype)
    return _PagedBatch(meta.slot_mapping, block_tables, mask, False, token_seq_idx,
                       token_query_pos, num_seqs, meta.max_query_len, workspace)


# --------------------------------------------------------------------------------------------
# Layers
# --------------------------------------------------------------------------------------------

class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        input_dtype = x.dtype
        x32 = x.to(torch.float32)
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(input_dtype)


def _llama3_inv_freq(inv_freq: Tensor, scaling: dict[str, Any]) -> Tensor:
    """Llama 3.1 frequency scaling, exactly as transformers' _compute_llama3_parameters."""
    factor = scaling["factor"]
    low_freq_factor = scaling["low_freq_factor"]
    high_freq_factor = scaling["high_freq_factor"]
    old_context_len = scaling["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


class RotaryEmbedding:
    """Computes HF-convention cos/sin for given positions.

    Not an nn.Module and inv_freq is not a buffer on purpose: model.to(bfloat16) would cast it,
    while HF computes the angles in float32. A float32 copy is cached per device instead.
    """

    def __init__(self, config: ModelConfig) -> None:
        dim = config.resolved_head_dim
        exponent = torch.arange(0, dim, 2, dtype=torch.int64, device="cpu").float() / dim
        inv_freq = 1.0 / (config.rope_theta ** exponent)
        if config.rope_scaling is not None:
            inv_freq = _llama3_inv_freq(inv_freq, config.rope_scaling)
        self._inv_freq: dict[torch.device, Tensor] = {torch.device("cpu"): inv_freq}

    def _inv_freq_on(self, device: torch.device) -> Tensor:
        if device not in self._inv_freq:
            self._inv_freq[device] = self._inv_freq[torch.device("cpu")].to(device)
        return self._inv_freq[device]

    def cos_sin(self, positions: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """positions [...] -> cos, sin [..., head_dim] in `dtype`."""
        freqs = positions.to(torch.float32)[..., None] * self._inv_freq_on(positions.device)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x [..., heads, head_dim]; cos/sin [..., head_dim] broadcast over heads."""
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    return x * cos + _rotate_half(x) * sin


class LlamaAttention(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.num_queries_per_kv = config.num_queries_per_kv
        self.head_dim = config.resolved_head_dim
        hidden, q_size = config.hidden_size, self.num_heads * self.head_dim
        kv_size = self.num_kv_heads * self.head_dim
        self.q_proj = nn.Linear(hidden, q_size, bias=False)
        self.k_proj = nn.Linear(hidden, kv_size, bias=False)
        self.v_proj = nn.Linear(hidden, kv_size, bias=False)
        self.o_proj = nn.Linear(q_size, hidden, bias=False)

    def _qkv(self, x: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x [..., hidden] -> rotated q [..., heads, d], rotated k and v [..., kv_heads, d]."""
        lead = x.shape[:-1]
        q = self.q_proj(x).view(*lead, self.num_heads, self.head_dim)
        k = self.k_proj(x).view(*lead, self.num_kv_heads, self.head_dim)
        v = self.v_proj(x).view(*lead, self.num_kv_heads, self.head_dim)
        return _apply_rotary(q, cos, sin), _apply_rotary(k, cos, sin), v

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, kv_cache: Tensor,
                step: _PagedStep) -> Tensor:
        """x [num_tokens, hidden] -> [num_tokens, hidden], attending through the paged cache."""
        q, k, v = self._qkv(x, cos, sin)
        k_cache, v_cache = kv_cache[0], kv_cache[1]
        # Write this step's K/V first so that the gathers below see them.
        k_cache.view(-1, self.num_kv_heads, self.head_dim).index_copy_(0, step.slot_mapping, k)
        v_cache.view(-1, self.num_kv_heads, self.head_dim).index_copy_(0, step.slot_mapping, v)
        if len(step.groups) == 1:
            out = self._attend(q, k_cache, v_cache, step.groups[0])
        else:
            out = q.new_empty(q.shape[0], self.num_heads * self.head_dim)
            for batch in step.groups:
                assert batch.token_idx is not None
                out[batch.token_idx] = self._attend(q[batch.token_idx], k_cache, v_cache, batch)
        projected: Tensor = self.o_proj(out)
        return projected

    def _attend(self, q: Tensor, k_cache: Tensor, v_cache: Tensor,
                batch: _PagedBatch) -> Tensor:
        """q [tokens, heads, d] of one group -> attention output [tokens, heads * d]."""
        block_size = k_cache.shape[1]
        keys = self._gather(k_cache, batch, block_size, slot=0)
        values = self._gather(v_cache, batch, block_size, slot=1)
        if batch.is_decode:
            # The query heads sharing a kv head become the "query length" axis: GQA for free.
            queries = q.view(batch.num_seqs, self.num_kv_heads, self.num_queries_per_kv, -1)
            out = F.scaled_dot_product_attention(queries, keys, values, attn_mask=batch.mask)
            out = out.reshape(batch.num_seqs, -1)
        else:
            out = F.scaled_dot_product_attention(self._pad_queries(q, batch), keys, values,
                                                 attn_mask=batch.mask)
            out = self._unpad_output(out, batch)
        return out

    def _gather(self, cache: Tensor, batch: _PagedBatch, block_size: int, slot: int) -> Tensor:
        """cache [num_blocks, block_size, kv_heads, d] -> [num_seqs, kv_heads, kv_len, d]."""
        num_seqs, num_blocks = batch.block_tables.shape
        rows = cache.view(cache.shape[0], -1)  # one row per block
        # index_select is a plain row gather, several times faster on CPU than
        # cache[block_tables] (advanced indexing).
        out = batch.workspace.buffer(slot, num_seqs * num_blocks, rows)
        gathered = torch.index_select(rows, 0, batch.block_tables.flatten(), out=out)
        return gathered.view(num_seqs, num_blocks * block_size, self.num_kv_heads,
                             self.head_dim).transpose(1, 2)

    def _pad_queries(self, q: Tensor, batch: _PagedBatch) -> Tensor:
        """q [num_tokens, heads, d] -> [num_seqs, kv_heads, group * max_query_len, d]."""
        group = self.num_queries_per_kv
        padded = q.new_zeros(batch.num_seqs, batch.max_query_len, self.num_kv_heads, group,
                             self.head_dim)
        padded[batch.token_seq_idx, batch.token_query_pos] = q.view(
            -1, self.num_kv_heads, group, self.head_dim)
        return padded.permute(0, 2, 3, 1, 4).reshape(
            batch.num_seqs, self.num_kv_heads, group * batch.max_query_len, self.head_dim)

    def _unpad_output(self, out: Tensor, batch: _PagedBatch) -> Tensor:
        """Inverse of _pad_queries: -> [num_tokens, heads * d]."""
        out = out.reshape(batch.num_seqs, self.num_kv_heads, self.num_queries_per_kv,
                          batch.max_query_len, self.head_dim).permute(0, 3, 1, 2, 4)
        return out[batch.token_seq_idx, batch.token_query_pos].reshape(
            batch.token_seq_idx.shape[0], -1)

    def forward_dense(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        """x [batch, seq, hidden] -> [batch, seq, hidden]; plain causal attention, no cache."""
        q, k, v = (t.transpose(1, 2) for t in self._qkv(x, cos, sin))
        k = k.repeat_interleave(self.num_queries_per_kv, dim=1)
        v = v.repeat_interleave(self.num_queries_per_kv, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        projected: Tensor = self.o_proj(out.transpose(1, 2).flatten(2))
        return projected


class LlamaMLP(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        hidden, inter = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        out: Tensor = self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return out


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.self_attn = LlamaAttention(config)
        self.mlp = LlamaMLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor, kv_cache: Tensor,
                step: _PagedStep) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, kv_cache, step)
        out: Tensor = x + self.mlp(self.post_attention_layernorm(x))
        return out

    def forward_dense(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + self.self_attn.forward_dense(self.input_layernorm(x), cos, sin)
        out: Tensor = x + self.mlp(self.post_attention_layernorm(x))
        return out


class LlamaModel(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(LlamaDecoderLayer(config)
                                    for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class LlamaForCausalLM(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.model = LlamaModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.rotary = RotaryEmbedding(config)
        self._workspace = _GatherWorkspace()
        self.tie_weights()

    def tie_weights(self) -> None:
        """Shares the embedding with lm_head when the config says so (call after reassigning)."""
        if self.config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids: Tensor, positions: Tensor, kv_caches: list[Tensor],
                attn_metadata: AttentionMetadata) -> Tensor:
        """Flat batch forward through the paged cache; returns final-norm hidden states."""
        if len(kv_caches) != len(self.model.layers):
            raise ValueError(f"expected {len(self.model.layers)} kv caches (one per layer), "
                             f"got {len(kv_caches)}")
        if input_ids.shape[0] != attn_metadata.slot_mapping.shape[0]:
            raise ValueError(f"input_ids has {input_ids.shape[0]} tokens but slot_mapping has "
                             f"{attn_metadata.slot_mapping.shape[0]}")
        step = _prepare_step(attn_metadata, kv_caches[0].shape[2],
                                     self.config.num_queries_per_kv,
                                     self.model.embed_tokens.weight.dtype, self._workspace)
        hidden = self.model.embed_tokens(input_ids)
        cos, sin = self.rotary.cos_sin(positions, hidden.dtype)
        for layer, kv_cache in zip(self.model.layers, kv_caches):
            hidden = layer(hidden, cos, sin, kv_cache, step)
        out: Tensor = self.model.norm(hidden)
        return out

    def compute_logits(self, hidden_states: Tensor) -> Tensor:
        logits: Tensor = self.lm_head(hidden_states)
        return logits.float()

    def forward_dense(self, input_ids: Tensor) -> Tensor:
        """[batch, seq] -> logits [batch, seq, vocab]; the cache-free reference path."""
        hidden = self.model.embed_tokens(input_ids)
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        cos, sin = self.rotary.cos_sin(positions, hidden.dtype)
        for layer in self.model.layers:
            assert isinstance(layer, LlamaDecoderLayer)
            hidden = layer.forward_dense(hidden, cos, sin)
        return self.compute_logits(self.model.norm(hidden))


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------

def allocate_kv_cache(config: ModelConfig, num_blocks: int, block_size: int, dtype: torch.dtype,
                      device: torch.device) -> list[Tensor]:
    """One zeroed tensor per layer: [2 (K, V), num_blocks, block_size, kv_heads, head_dim]."""
    if num_blocks <= 0 or block_size <= 0:
        raise ValueError(f"num_blocks ({num_blocks}) and block_size ({block_size}) must be "
                         "positive")
    shape = (2, num_blocks, block_size, config.num_key_value_heads, config.resolved_head_dim)
    return [torch.zeros(shape, dtype=dtype, device=device)
            for _ in range(config.num_hidden_layers)]


def kv_cache_bytes_per_block(config: ModelConfig, block_size: int, dtype: torch.dtype) -> int:
    """Bytes of one block across all layers, K and V."""
    element_size = torch.empty((), dtype=dtype).element_size()
    per_layer = 2 * block_size * config.num_key_value_heads * config.resolved_head_dim
    return per_layer * config.num_hidden_layers * element_size


def init_random_weights(model: LlamaForCausalLM, seed: int) -> None:
    """Deterministic for a seed regardless of device/dtype: N(0, 0.02) for linear and embedding
    weights (HF's initializer_range), ones for norms. Tied weights are drawn once."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():  # yields a tied parameter once
            if name.endswith("norm.weight"):
                param.fill_(1.0)
                continue
            values = torch.empty(param.shape, dtype=torch.float32).normal_(
                0.0, 0.02, generator=generator)
            param.copy_(values)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def weight_bytes(model: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())
