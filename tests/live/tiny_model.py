"""A tiny random-weight Llama checkpoint that vLLM (and the reference server) can serve, built
here with no download: a byte-level BPE tokenizer trained with `tokenizers` on the repository's
own text, a 2-layer, width-128 `LlamaConfig`, weights in safetensors, and a chat template.

    python -m tests.live.tiny_model build/tiny-llama

The weights are random (seeded), so the text it writes is noise; what the tests need is an
engine doing real work per token: prefill, decode, a KV cache, batching. Idempotent: an
existing, complete directory is left as it is.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VOCAB_SIZE = 2048
HIDDEN = 128
LAYERS = 2
HEADS = 4
MAX_POSITIONS = 2048
SEED = 0
FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
         "generation_config.json")
# ChatML-style: the template vLLM's chat endpoint renders with the tokenizer's own specials.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
SPECIALS = ["<s>", "</s>", "<unk>", "<|im_start|>", "<|im_end|>"]


def corpus() -> Iterator[str]:
    """The repository's own prose and code: enough text for a 2k-token BPE vocabulary."""
    for pattern in ("*.md", "docs/*.md", "monitor/**/*.py", "exporters/**/*.py",
                    "reference_server/*.py", "alerts/*.yaml"):
        for path in sorted(REPO.glob(pattern)):
            try:
                yield path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue


def build(out: Path) -> Path:
    if all((out / name).is_file() for name in FILES):
        return out
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(corpus(), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>",
                                   eos_token="</s>", unk_token="<unk>", pad_token="</s>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)

    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=tokenizer.get_vocab_size(), hidden_size=HIDDEN, intermediate_size=4 * HIDDEN,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=HEADS,
        max_position_embeddings=MAX_POSITIONS, bos_token_id=fast.bos_token_id,
        eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"), tie_word_embeddings=True,
        torch_dtype="float32")
    model = LlamaForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)
    (out / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": config.bos_token_id, "eos_token_id": config.eos_token_id}) + "\n")
    missing = [name for name in FILES if not (out / name).is_file()]
    if missing:
        raise RuntimeError(f"{out}: the build wrote no {', '.join(missing)}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the checkpoint directory to write")
    args = parser.parse_args(argv)
    print(build(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
