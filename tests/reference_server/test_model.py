"""Model numerics (vs transformers), paged vs dense attention, and checkpoint I/O."""

from __future__ import annotations

import dataclasses
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from reference_server.model import (
    BUILTIN_MODELS,
    AttentionMetadata,
    LlamaForCausalLM,
    ModelConfig,
    allocate_kv_cache,
    count_parameters,
    init_random_weights,
    kv_cache_bytes_per_block,
    weight_bytes,
)
from reference_server.weights import load_hf_checkpoint, save_hf_checkpoint

LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 32}


def small_config(**overrides: Any) -> ModelConfig:
    base: dict[str, Any] = dict(
        vocab_size=97, hidden_size=64, intermediate_size=112, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
        bos_token_id=1, eos_token_ids=(2,))
    base.update(overrides)
    return ModelConfig(**base)


def random_model(config: ModelConfig, seed: int = 0) -> LlamaForCausalLM:
    model = LlamaForCausalLM(config).eval()
    init_random_weights(model, seed)
    return model


CONFIGS = {
    "mha": small_config(),
    "gqa": small_config(num_attention_heads=8, num_key_value_heads=2),
    "tied": small_config(tie_word_embeddings=True),
    "llama3_rope": small_config(num_key_value_heads=2, rope_theta=500000.0,
                                rope_scaling=LLAMA3_SCALING),
    "head_dim_override": small_config(head_dim=24, eos_token_ids=(2, 3)),
}


# --------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------

def test_builtin_models() -> None:
    tiny, small = BUILTIN_MODELS["tiny"], BUILTIN_MODELS["small"]
    assert tiny.resolved_head_dim == 32 and tiny.num_key_value_heads == 4
    assert (tiny.vocab_size, tiny.bos_token_id, tiny.eos_token_ids) == (264, 256, (257,))
    assert (small.hidden_size, small.num_hidden_layers, small.max_position_embeddings) == \
        (768, 12, 4096)


@pytest.mark.parametrize("overrides, message", [
    ({"hidden_size": 0}, "hidden_size"),
    ({"num_key_value_heads": 3}, "divisible"),
    ({"hidden_size": 66}, "head_dim"),
    ({"head_dim": 7}, "head_dim"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "yarn"),
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "low_freq_factor"),
    ({"eos_token_ids": (500,)}, "eos_token_ids"),
], ids=["zero_hidden", "heads_not_divisible", "hidden_not_divisible", "odd_head_dim",
        "unsupported_rope", "incomplete_llama3", "eos_outside_vocab"])
def test_config_validation(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        small_config(**overrides)


@pytest.mark.parametrize("name", list(CONFIGS), ids=list(CONFIGS))
def test_hf_dict_round_trip(name: str) -> None:
    config = CONFIGS[name]
    assert ModelConfig.from_hf_dict(config.to_hf_dict()) == config


def test_from_hf_dict_accepts_transformers5_rope_parameters() -> None:
    d = CONFIGS["llama3_rope"].to_hf_dict()
    del d["rope_theta"], d["rope_scaling"]
    d["rope_parameters"] = {**LLAMA3_SCALING, "rope_theta": 500000.0}
    assert ModelConfig.from_hf_dict(d) == CONFIGS["llama3_rope"]
    d["rope_parameters"] = {"rope_type": "default", "rope_theta": 1234.0}
    parsed = ModelConfig.from_hf_dict(d)
    assert parsed.rope_scaling is None and parsed.rope_theta == 1234.0


# --------------------------------------------------------------------------------------------
# Numerics vs transformers, checkpoint round trip
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["mha", "gqa", "tied", "llama3_rope", "head_dim_override"],
                         ids=["mha", "gqa", "tied", "llama3_rope", "head_dim_override"])
def test_logits_match_transformers(name: str, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    model = random_model(CONFIGS[name])
    save_hf_checkpoint(model, tmp_path)
    hf_model = transformers.LlamaForCausalLM.from_pretrained(tmp_path, dtype=torch.float32)
    hf_model.eval()
    # 200 tokens: past original_max_position_embeddings=32, so llama3 scaling matters.
    input_ids = torch.randint(0, model.config.vocab_size, (2, 200),
                              generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        ours = model.forward_dense(input_ids)
        theirs = hf_model(input_ids).logits.float()
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("tied", [False, True], ids=["untied", "tied"])
def test_checkpoint_round_trip(tied: bool, tmp_path: Path) -> None:
    model = random_model(small_config(tie_word_embeddings=tied), seed=3)
    save_hf_checkpoint(model, tmp_path)
    loaded = load_hf_checkpoint(tmp_path)
    assert loaded.config == model.config
    ours, theirs = model.state_dict(), loaded.state_dict()
    assert ours.keys() == theirs.keys()
    for name in ours:
        assert torch.equal(ours[name], theirs[name]), name
    assert (loaded.lm_head.weight is loaded.model.embed_tokens.weight) == tied


def test_load_sharded_checkpoint_in_bf16(tmp_path: Path) -> None:
    model = random_model(small_config(), seed=4)
    save_hf_checkpoint(model, tmp_path)
    state = load_file(tmp_path / "model.safetensors")
    (tmp_path / "model.safetensors").unlink()
    names = sorted(state)
    shards = {"model-00001-of-00002.safetensors": names[::2],
              "model-00002-of-00002.safetensors": names[1::2]}
    weight_map = {}
    for file, shard_names in shards.items():
        save_file({n: state[n] for n in shard_names}, tmp_path / file)
        weight_map.update({n: file for n in shard_names})
    index = {"metadata": {}, "weight_map": weight_map}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    loaded = load_hf_checkpoint(tmp_path, dtype=torch.bfloat16)
    assert loaded.lm_head.weight.dtype == torch.bfloat16
    assert torch.equal(loaded.lm_head.weight, model.lm_head.weight.to(torch.bfloat16))


def _edit_config(path: Path, **changes: Any) -> None:
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config))


def _drop_tensor(path: Path, name: str) -> None:
    state = load_file(path / "model.safetensors")
    del state[name]
    save_file(state, path / "model.safetensors")


def _add_tensor(path: Path, name: str) -> None:
    state = load_file(path / "model.safetensors")
    state[name] = torch.zeros(3)
    save_file(state, path / "model.safetensors")


def _reshape_tensor(path: Path, name: str) -> None:
    state = load_file(path / "model.safetensors")
    state[name] = state[name][:-1].contiguous()
    save_file(state, path / "model.safetensors")


@pytest.mark.parametrize("corrupt, message", [
    (lambda p: (p / "config.json").unlink(), "config.json"),
    (lambda p: _edit_config(p, model_type="qwen2", architectures=["Qwen2ForCausalLM"]),
     "qwen2"),
    (lambda p: _edit_config(p, rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "dynamic"),
    (lambda p: _drop_tensor(p, "model.layers.1.mlp.up_proj.weight"),
     "model.layers.1.mlp.up_proj.weight"),
    (lambda p: _add_tensor(p, "model.layers.0.self_attn.q_proj.bias"),
     "model.layers.0.self_attn.q_proj.bias"),
    (lambda p: _reshape_tensor(p, "model.norm.weight"), "model.norm.weight"),
    (lambda p: (p / "model.safetensors").unlink(), "safetensors"),
], ids=["missing_config", "wrong_model_type", "unsupported_rope", "missing_tensor",
        "unexpected_tensor", "shape_mismatch", "no_weights"])
def test_load_errors_name_the_culprit(corrupt: Any, message: str, tmp_path: Path) -> None:
    save_hf_checkpoint(random_model(small_config()), tmp_path)
    corrupt(tmp_path)
    with pytest.raises(ValueError, match=message):
        load_hf_checkpoint(tmp_path)


def test_load_error_for_missing_dir(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nope"):
        load_hf_checkpoint(tmp_path / "nope")


def test_mistral_style_config_is_accepted(tmp_path: Path) -> None:
    save_hf_checkpoint(random_model(small_config()), tmp_path)
    _edit_config(tmp_path, model_type="mistral", architectures=["MistralForCausalLM"],
                 sliding_window=None)
    assert load_hf_checkpoint(tmp_path).config.num_hidden_layers == 2


# --------------------------------------------------------------------------------------------
# Paged attention vs dense
# --------------------------------------------------------------------------------------------

@dataclass
class _Seq:
    token_ids: list[int]
    chunks: list[int]            # query length per step it takes part in
    start_step: int
    block_ids: list[int] = field(default_factory=list)
    num_computed: int = 0


class _PagedRunner:
    """A miniature scheduler: builds AttentionMetadata for a flat mixed batch per step, handing
    out blocks from a shuffled free list so that block tables are non-contiguous."""

    def __init__(self, model: LlamaForCausalLM, block_size: int, num_blocks: int) -> None:
        self.model, self.block_size = model, block_size
        dtype = model.lm_head.weight.dtype
        self.kv_caches = allocate_kv_cache(model.config, num_blocks, block_size, dtype,
                                           torch.device("cpu"))
        self.free_blocks = list(range(num_blocks))
        random.Random(0).shuffle(self.free_blocks)

    def step(self, batch: list[tuple[_Seq, int]]) -> torch.Tensor:
        ids, positions, slots, starts, seq_lens = [], [], [], [0], []
        for seq, query_len in batch:
            new_positions = range(seq.num_computed, seq.num_computed + query_len)
            while len(seq.block_ids) * self.block_size < new_positions[-1] + 1:
                seq.block_ids.append(self.free_blocks.pop())
            ids += seq.token_ids[new_positions.start:new_positions.stop]
            positions += list(new_positions)
            slots += [seq.block_ids[p // self.block_size] * self.block_size
                      + p % self.block_size for p in new_positions]
            starts.append(starts[-1] + query_len)
            seq.num_computed += query_len
            seq_lens.append(seq.num_computed)
        max_blocks = max(len(seq.block_ids) for seq, _ in batch)
        tables = [seq.block_ids + [0] * (max_blocks - len(seq.block_ids)) for seq, _ in batch]
        meta = AttentionMetadata(
            query_start_loc=torch.tensor(starts), seq_lens=torch.tensor(seq_lens),
            slot_mapping=torch.tensor(slots), block_tables=torch.tensor(tables),
            max_query_len=max(q for _, q in batch), max_seq_len=max(seq_lens))
        hidden = self.model(torch.tensor(ids), torch.tensor(positions), self.kv_caches, meta)
        return self.model.compute_logits(hidden)


def _run_schedule(model: LlamaForCausalLM, block_size: int,
                  seqs: list[_Seq]) -> list[tuple[_Seq, int, torch.Tensor]]:
    """Runs all steps; returns (seq, first position, logits rows) per seq per step."""
    runner = _PagedRunner(model, block_size, num_blocks=64)
    results: list[tuple[_Seq, int, torch.Tensor]] = []
    num_steps = max(s.start_step + len(s.chunks) for s in seqs)
    for step in range(num_steps):
        batch = [(s, s.chunks[step - s.start_step]) for s in seqs
                 if 0 <= step - s.start_step < len(s.chunks)]
        random.Random(step).shuffle(batch)  # batch order must not matter
        logits = runner.step(batch)
        offset = 0
        for seq, query_len in batch:
            results.append((seq, seq.num_computed - query_len, logits[offset:offset + query_len]))
            offset += query_len
    return results


def _make_seqs(vocab_size: int) -> list[_Seq]:
    gen = torch.Generator().manual_seed(7)
    specs = [  # (prompt chunks, num decode steps, start step)
        ([7], 6, 0),          # full prefill then decode
        ([5, 8], 5, 0),       # 2-chunk prefill
        ([1], 5, 1),          # one-token prompt joining later
        ([8, 6, 6], 4, 0),    # 3-chunk prefill, crosses several blocks
        ([9], 3, 2),          # joins while others decode
        ([17, 16], 2, 3),
    ]
    seqs = []
    for prompt_chunks, num_decode, start in specs:
        chunks = prompt_chunks + [1] * num_decode
        tokens = torch.randint(0, vocab_size, (sum(chunks),), generator=gen).tolist()
        seqs.append(_Seq(tokens, chunks, start))
    return seqs


@pytest.mark.parametrize("name", ["mha", "gqa", "llama3_rope"], ids=["mha", "gqa", "llama3"])
@pytest.mark.parametrize("block_size", [4, 16], ids=["block4", "block16"])
def test_paged_matches_dense(name: str, block_size: int) -> None:
    model = random_model(CONFIGS[name])
    seqs = _make_seqs(model.config.vocab_size)
    with torch.inference_mode():
        results = _run_schedule(model, block_size, seqs)
        dense = {id(s): model.forward_dense(torch.tensor([s.token_ids]))[0] for s in seqs}
    assert any(len(rows) == 1 for _, _, rows in results)
    for seq, first, rows in results:
        expected = dense[id(seq)][first:first + rows.shape[0]]
        torch.testing.assert_close(rows, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("grad_mode", [torch.inference_mode, torch.no_grad, torch.enable_grad],
                         ids=["inference_mode", "no_grad", "grad_enabled"])
def test_pure_decode_steps_match_dense(grad_mode: Any) -> None:
    """All-decode steps take the fast path; check it alone, with GQA and varied lengths, and in
    every autograd mode (the gather workspace is only reused when autograd is off)."""
    model = random_model(CONFIGS["gqa"])
    seqs = [_Seq(list(range(3 + 5 * i, 3 + 5 * i + n + 4)), [n] + [1] * 4, 0)
            for i, n in enumerate([1, 6, 13, 30])]
    with grad_mode():
        results = _run_schedule(model, 4, seqs)
        for seq, first, rows in results:
            dense = model.forward_dense(torch.tensor([seq.token_ids]))[0]
            torch.testing.assert_close(rows, dense[first:first + rows.shape[0]],
                                       atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_low_precision_forward_is_finite(dtype: torch.dtype) -> None:
    model = random_model(CONFIGS["gqa"]).to(dtype)
    seqs = _make_seqs(model.config.vocab_size)
    with torch.inference_mode():
        results = _run_schedule(model, 16, seqs)
        dense = model.forward_dense(torch.tensor([seqs[0].token_ids]))
    assert dense.dtype == torch.float32 and torch.isfinite(dense).all()
    for seq, first, rows in results:
        assert torch.isfinite(rows).all()
        if seq is seqs[0]:  # loose agreement with the float32-output dense path
            torch.testing.assert_close(rows, dense[0, first:first + rows.shape[0]],
                                       atol=0.05, rtol=0.05)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------

def test_kv_cache_allocation_and_size() -> None:
    config = CONFIGS["gqa"]
    caches = allocate_kv_cache(config, num_blocks=5, block_size=16, dtype=torch.bfloat16,
                               device=torch.device("cpu"))
    assert len(caches) == config.num_hidden_layers
    assert caches[0].shape == (2, 5, 16, 2, 8) and not caches[0].any()
    total = sum(c.numel() * c.element_size() for c in caches)
    assert kv_cache_bytes_per_block(config, 16, torch.bfloat16) * 5 == total
    with pytest.raises(ValueError, match="num_blocks"):
        allocate_kv_cache(config, 0, 16, torch.float32, torch.device("cpu"))


def test_init_random_weights_is_deterministic() -> None:
    a, b = random_model(CONFIGS["tied"], seed=5), random_model(CONFIGS["tied"], seed=5)
    c = random_model(CONFIGS["tied"], seed=6)
    for (name, pa), pb, pc in zip(a.named_parameters(), b.parameters(), c.parameters()):
        assert torch.equal(pa, pb), name
        if name.endswith("norm.weight"):
            assert torch.equal(pa, torch.ones_like(pa))
        else:
            assert not torch.equal(pa, pc) and abs(pa.std().item() - 0.02) < 0.005


def test_parameter_counts() -> None:
    untied = LlamaForCausalLM(CONFIGS["mha"])
    tied = LlamaForCausalLM(dataclasses.replace(CONFIGS["mha"], tie_word_embeddings=True))
    assert count_parameters(untied) - count_parameters(tied) == 97 * 64
    assert weight_bytes(untied) == 4 * count_parameters(untied)
    assert weight_bytes(untied.to(torch.bfloat16)) == 2 * count_parameters(untied)
