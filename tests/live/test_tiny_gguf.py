"""tests/live/tiny_gguf.py, checked without llama.cpp: the GGUF it writes from the tiny model,
read back with the `gguf` package's own reader, holds the checkpoint's weights (Q and K rows
in GGUF's rotary order) and its whole BPE vocabulary, as llama.cpp's llama architecture
expects them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.integration import unavailable
from tests.live.tiny_gguf import build, permute, read_safetensors
from tests.live.vllm_server import tiny_model

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    checkpoint = tiny_model()
    if not (checkpoint / "model.safetensors").is_file():
        unavailable(f"the tiny model is not built in {checkpoint} (make live-engines)")
    out = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    return checkpoint, build(checkpoint, out)


def _field(reader: object, key: str) -> object:
    field = reader.fields[key]  # type: ignore[attr-defined]
    return field.contents()


def test_the_metadata_is_llamas_and_the_vocabulary_complete(written: tuple[Path, Path]) -> None:
    import gguf
    checkpoint, out = written
    reader = gguf.GGUFReader(str(out))
    config = json.loads((checkpoint / "config.json").read_text())
    tokenizer = json.loads((checkpoint / "tokenizer.json").read_text())
    assert _field(reader, "general.architecture") == "llama"
    assert _field(reader, "llama.block_count") == config["num_hidden_layers"]
    assert _field(reader, "llama.embedding_length") == config["hidden_size"]
    assert _field(reader, "llama.attention.head_count") == config["num_attention_heads"]
    tokens = _field(reader, "tokenizer.ggml.tokens")
    assert isinstance(tokens, list) and len(tokens) == config["vocab_size"]
    assert {tokens[i]: i for i in range(len(tokens))} == {
        **tokenizer["model"]["vocab"], **{a["content"]: a["id"] for a in tokenizer["added_tokens"]}}
    assert len(_field(reader, "tokenizer.ggml.merges")) == len(  # type: ignore[arg-type]
        tokenizer["model"]["merges"])
    assert tokens[_field(reader, "tokenizer.ggml.eos_token_id")] == "<|im_end|>"  # type: ignore[index]
    assert _field(reader, "tokenizer.ggml.add_bos_token") is False


def test_the_weights_are_the_checkpoints(written: tuple[Path, Path]) -> None:
    import gguf
    checkpoint, out = written
    hf = read_safetensors(checkpoint / "model.safetensors")
    heads = json.loads((checkpoint / "config.json").read_text())["num_attention_heads"]
    tensors = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(str(out)).tensors}
    assert len(tensors) == len(hf)  # the output projection is tied to the embedding
    assert np.array_equal(tensors["token_embd.weight"], hf["model.embed_tokens.weight"])
    assert np.array_equal(tensors["blk.1.ffn_down.weight"],
                          hf["model.layers.1.mlp.down_proj.weight"])
    q = hf["model.layers.0.self_attn.q_proj.weight"]
    assert np.array_equal(tensors["blk.0.attn_q.weight"], permute(q, heads))
    assert not np.array_equal(permute(q, heads), q)  # the permutation did move rows
