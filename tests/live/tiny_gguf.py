"""The tiny random-weight Llama of ``tests/live/tiny_model.py``, written as a GGUF file that
llama.cpp's server loads: the same weights and the same byte-level BPE vocabulary, so vLLM and
llama.cpp serve one model. Built here with no download, by the `gguf` package (llama.cpp's own
GGUF writer, a test dependency of the project):

    python -m tests.live.tiny_gguf build/tiny-llama build/tiny-llama.gguf

It needs only `gguf` and numpy (the safetensors file is read by hand: an 8-byte header length,
a JSON header, raw little-endian tensors), no torch. All tensors stay float32 (file type
ALL_F32). Idempotent: an existing file is left as it is.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np

ARCH = "llama"
SPECIAL = 3  # gguf.TokenType.CONTROL
NORMAL = 1   # gguf.TokenType.NORMAL
# HF names -> GGUF names (llama.cpp's src/llama-arch.cpp, LLM_ARCH_LLAMA).
LAYER_TENSORS = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
    "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    base = 8 + length
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] != "F32":
            raise ValueError(f"{path}: {name} is {meta['dtype']}; the tiny model is float32")
        start, end = meta["data_offsets"]
        tensors[name] = np.frombuffer(raw[base + start:base + end], dtype="<f4").reshape(
            meta["shape"]).copy()
    return tensors


def permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """HF's rotary layout of Q/K rows (halves) to GGUF's (interleaved pairs), as llama.cpp's
    convert_hf_to_gguf.py LlamaModel.permute does."""
    rows = weights.shape[0]
    return (weights.reshape(heads, 2, rows // heads // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def vocabulary(tokenizer: dict[str, Any]) -> tuple[list[str], list[int], list[str]]:
    """Tokens in id order, their types, and the merges as "a b" strings."""
    model = tokenizer["model"]
    if model.get("type") != "BPE":
        raise ValueError(f"expected a BPE tokenizer, got {model.get('type')}")
    by_id = {int(i): token for token, i in model["vocab"].items()}
    for added in tokenizer.get("added_tokens", []):
        by_id[int(added["id"])] = added["content"]
    if sorted(by_id) != list(range(len(by_id))):
        raise ValueError("token ids are not contiguous")
    specials = {a["content"] for a in tokenizer.get("added_tokens", []) if a.get("special")}
    tokens = [by_id[i] for i in range(len(by_id))]
    types = [SPECIAL if t in specials else NORMAL for t in tokens]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, types, merges


def build(checkpoint: Path, out: Path) -> Path:
    if out.is_file() and out.stat().st_size > 0:
        return out
    import gguf

    config = json.loads((checkpoint / "config.json").read_text())
    tokenizer = json.loads((checkpoint / "tokenizer.json").read_text())
    template_file = checkpoint / "chat_template.jinja"
    template = (template_file.read_text() if template_file.is_file() else
                json.loads((checkpoint / "tokenizer_config.json").read_text())["chat_template"])
    tensors = read_safetensors(checkpoint / "model.safetensors")
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    hidden = config["hidden_size"]
    head_dim = config.get("head_dim") or hidden // heads
    rope = config.get("rope_parameters") or {}
    tokens, types, merges = vocabulary(tokenizer)

    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial")
    writer = gguf.GGUFWriter(str(partial), ARCH)
    writer.add_name("inferwatch tiny-llama (random weights)")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(hidden)
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(float(rope.get("rope_theta", config.get("rope_theta", 10000.0))))
    writer.add_layer_norm_rms_eps(config["rms_norm_eps"])
    writer.add_vocab_size(len(tokens))
    # The HF tokenizer: byte-level BPE with GPT-2's split regex, no BOS added.
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    writer.add_bos_token_id(config["bos_token_id"])
    writer.add_eos_token_id(config["eos_token_id"])
    writer.add_add_bos_token(False)
    writer.add_add_eos_token(False)
    writer.add_chat_template(template)

    writer.add_tensor("token_embd.weight", tensors.pop("model.embed_tokens.weight"))
    writer.add_tensor("output_norm.weight", tensors.pop("model.norm.weight"))
    if "lm_head.weight" in tensors:  # absent when tied: llama.cpp then reuses token_embd
        writer.add_tensor("output.weight", tensors.pop("lm_head.weight"))
    for layer in range(config["num_hidden_layers"]):
        for hf, name in LAYER_TENSORS.items():
            data = tensors.pop(f"model.layers.{layer}.{hf}.weight")
            if name == "attn_q":
                data = permute(data, heads)
            elif name == "attn_k":
                data = permute(data, kv_heads)
            writer.add_tensor(f"blk.{layer}.{name}.weight", data)
    if tensors:
        raise ValueError(f"tensors left unconverted: {sorted(tensors)}")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.replace(out)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("checkpoint", type=Path, help="the tiny model's directory (tiny_model.py)")
    parser.add_argument("out", type=Path, help="the .gguf file to write")
    args = parser.parse_args(argv)
    print(build(args.checkpoint, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
