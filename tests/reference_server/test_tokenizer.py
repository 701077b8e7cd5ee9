"""Byte and HF tokenizers, chat templates and incremental detokenization (no network)."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer as RawTokenizer
from tokenizers import decoders, models, pre_tokenizers, trainers

from reference_server.tokenizer import (
    ByteTokenizer,
    HFTokenizer,
    IncrementalDetokenizer,
    Tokenizer,
    load_tokenizer,
)

TEXTS = {
    "ascii": "Hello, world!",
    "latin": "héllo wörld, naïve café",
    "cjk": "こんにちは世界 你好世界",
    "emoji": "party 🎉🚀 family 👩\u200d👩\u200d👧 done",
    "mixed": "a€b😀c世d",
    "empty": "",
}
CORPUS = ["Hello world, this is a test.",
          "The quick brown fox jumps over the lazy dog.",
          "こんにちは世界 你好世界",
          "emoji 🎉🚀 party time",
          "héllo wörld naïve café"] * 3
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'tool' %}{{ raise_exception('no tools') }}{% endif %}"
    "[{{ m['role'] | upper }}] {{ m['content'] }}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}[ASSISTANT] {% endif %}")


def stream(tokenizer: Tokenizer, token_ids: list[int], prompt: list[int] | None = None
           ) -> list[str]:
    """Every push's output, then flush's output last."""
    detok = IncrementalDetokenizer(tokenizer, prompt or [])
    return [detok.push(t) for t in token_ids] + [detok.flush()]


def assert_clean_stream(pieces: list[str], expected: str) -> None:
    """The pieces add up to `expected`, and no piece ends inside a character."""
    assert "".join(pieces) == expected
    assert not any("\ufffd" in p for p in pieces)


# --------------------------------------------------------------------------------------------
# ByteTokenizer
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", list(TEXTS.values()), ids=list(TEXTS))
def test_byte_round_trip(text: str) -> None:
    tok = ByteTokenizer()
    ids = tok.encode(text)
    assert ids[0] == ByteTokenizer.BOS and ids[1:] == list(text.encode("utf-8"))
    assert tok.encode(text, add_bos=False) == ids[1:]
    assert tok.decode(ids + [ByteTokenizer.EOS, ByteTokenizer.PAD, 263]) == text


def test_byte_decode_invalid_utf8_replaces() -> None:
    tok = ByteTokenizer()
    assert tok.decode([0x61, 0xFF, 0x62]) == "a\ufffdb"
    assert tok.decode([0xE4, 0xB8]) == "\ufffd"  # truncated 3-byte character


@pytest.mark.parametrize("text", list(TEXTS.values()), ids=list(TEXTS))
def test_byte_incremental_never_splits_characters(text: str) -> None:
    tok = ByteTokenizer()
    ids = tok.encode(text, add_bos=False)
    ids.insert(len(ids) // 2, ByteTokenizer.EOS)  # specials decode to nothing, even mid-stream
    pieces = stream(tok, ids)
    assert_clean_stream(pieces, text)
    assert pieces[-1] == ""  # nothing left to flush for valid text


@pytest.mark.parametrize("seed", range(5))
def test_byte_incremental_matches_decode_on_random_bytes(seed: int) -> None:
    rng = random.Random(seed)
    # Biased towards UTF-8 lead/continuation bytes so truncated and invalid sequences occur.
    ids = [rng.choice([rng.randrange(0x80, 0xC0), rng.randrange(0xC0, 0x100),
                       rng.randrange(0, 0x80), rng.randrange(256, 264)]) for _ in range(300)]
    tok = ByteTokenizer()
    assert "".join(stream(tok, ids)) == tok.decode(ids)


def test_byte_incremental_holds_back_incomplete_character() -> None:
    detok = IncrementalDetokenizer(ByteTokenizer())
    assert [detok.push(b) for b in "😀".encode()] == ["", "", "", "😀"]
    assert detok.push(0xF0) == "" and detok.flush() == "\ufffd"


def test_simple_chat_template() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert ByteTokenizer().apply_chat_template(messages) == (
        "<|system|>\nBe brief.\n<|user|>\nHi\n<|assistant|>\n")
    with pytest.raises(ValueError, match=r"messages\[0\]"):
        ByteTokenizer().apply_chat_template([{"content": "no role"}])


# --------------------------------------------------------------------------------------------
# HFTokenizer built locally with the tokenizers library
# --------------------------------------------------------------------------------------------

def byte_level_bpe() -> RawTokenizer:
    tok = RawTokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def sentencepiece_like_bpe() -> RawTokenizer:
    """Metaspace ('▁word' leading-space tokens) with byte fallback, like Llama 2 / Mistral."""
    tok = RawTokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=150, special_tokens=["<unk>", "<s>", "</s>"],
                                  show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    # Byte tokens are ordinary (non-special) vocabulary entries, as in converted Llama models.
    spec = json.loads(tok.to_str())
    vocab = spec["model"]["vocab"]
    for byte in range(256):
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    spec["model"]["byte_fallback"] = True
    return RawTokenizer.from_str(json.dumps(spec))


def write_model_dir(path: Path, tok: RawTokenizer, **tokenizer_config: Any) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    tok.save(str(path / "tokenizer.json"))
    config = {"bos_token": "<s>", "eos_token": {"content": "</s>", "special": True},
              **tokenizer_config}
    (path / "tokenizer_config.json").write_text(json.dumps(config))
    return path


@pytest.fixture(scope="module")
def byte_level_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = write_model_dir(tmp_path_factory.mktemp("bytelevel"), byte_level_bpe(),
                           chat_template=CHAT_TEMPLATE)
    (path / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, 2]}))
    return path


@pytest.fixture(scope="module")
def metaspace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model_dir(tmp_path_factory.mktemp("metaspace"), sentencepiece_like_bpe())


def test_hf_special_tokens(byte_level_dir: Path) -> None:
    tok = HFTokenizer(byte_level_dir)
    assert tok.bos_token_id == 0
    assert tok.eos_token_ids == (1, 2)  # tokenizer_config's </s>, then generation_config's
    assert tok.vocab_size == 300


def test_hf_encode_decode(byte_level_dir: Path) -> None:
    tok = HFTokenizer(byte_level_dir)
    text = TEXTS["mixed"] + " " + TEXTS["cjk"]
    ids = tok.encode(text)
    assert ids[0] == 0 and ids.count(0) == 1
    assert tok.encode("<s>" + text) == ids  # a BOS already in the text is not doubled
    assert tok.encode(text, add_bos=False) == ids[1:]
    assert tok.decode(ids + [1]) == text  # special tokens are skipped


def test_hf_chat_template(byte_level_dir: Path) -> None:
    tok = HFTokenizer(byte_level_dir)
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert tok.apply_chat_template(messages) == "<s>[SYSTEM] S</s>\n[USER] U</s>\n[ASSISTANT] "
    with pytest.raises(ValueError, match="no tools"):
        tok.apply_chat_template([{"role": "tool", "content": "x"}])


def test_metaspace_byte_fallback_splits_unseen_characters(metaspace_dir: Path) -> None:
    tok = HFTokenizer(metaspace_dir)  # precondition of the incremental tests below
    ids = tok.encode("😀", add_bos=False)
    assert len(ids) == 5 and tok.decode(ids[:3]).endswith("\ufffd") and tok.decode(ids) == "😀"


def test_hf_chat_template_falls_back_to_simple(metaspace_dir: Path) -> None:
    tok = HFTokenizer(metaspace_dir)
    assert tok.apply_chat_template([{"role": "user", "content": "Hi"}]) == (
        "<|user|>\nHi\n<|assistant|>\n")


@pytest.mark.parametrize("fixture", ["byte_level_dir", "metaspace_dir"],
                         ids=["byte_level", "metaspace"])
@pytest.mark.parametrize("text", [TEXTS["emoji"], TEXTS["mixed"], TEXTS["cjk"] + " ok 😀",
                                  "Hello world, the quick fox"],
                         ids=["emoji", "mixed", "cjk", "ascii_words"])
def test_hf_incremental_detokenization(fixture: str, text: str,
                                       request: pytest.FixtureRequest) -> None:
    tok = HFTokenizer(request.getfixturevalue(fixture))
    ids = tok.encode(text, add_bos=False)
    assert len(ids) > 1
    assert_clean_stream(stream(tok, ids), tok.decode(ids))


@pytest.mark.parametrize("fixture", ["byte_level_dir", "metaspace_dir"],
                         ids=["byte_level", "metaspace"])
def test_hf_incremental_keeps_leading_space_after_prompt(
        fixture: str, request: pytest.FixtureRequest) -> None:
    tok = HFTokenizer(request.getfixturevalue(fixture))
    prompt, completion = tok.encode("Hello"), tok.encode(" world 🎉 café", add_bos=False)
    full = tok.decode(prompt + completion)
    pieces = stream(tok, completion, prompt)
    assert_clean_stream(pieces, full[len(tok.decode(prompt)):])
    assert "".join(pieces).startswith(" world")


def test_hf_incremental_flushes_incomplete_tail(byte_level_dir: Path) -> None:
    tok = HFTokenizer(byte_level_dir)
    ids = tok.encode("ok 😀", add_bos=False)[:-1]  # cut inside the emoji's bytes
    pieces = stream(tok, ids)
    assert "".join(pieces) == tok.decode(ids) and pieces[-1].endswith("\ufffd")
    assert not any("\ufffd" in p for p in pieces[:-1])


def test_hf_tokenizer_bad_file(tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(ValueError, match="tokenizer.json"):
        HFTokenizer(tmp_path)


# --------------------------------------------------------------------------------------------
# load_tokenizer
# --------------------------------------------------------------------------------------------

def test_load_tokenizer(byte_level_dir: Path, tmp_path: Path,
                        caplog: pytest.LogCaptureFixture) -> None:
    assert isinstance(load_tokenizer(None), ByteTokenizer)
    assert isinstance(load_tokenizer(byte_level_dir), HFTokenizer)
    with caplog.at_level(logging.WARNING, logger="reference_server.tokenizer"):
        assert isinstance(load_tokenizer(tmp_path), ByteTokenizer)
    assert "tokenizer.json" in caplog.text
    with pytest.raises(ValueError, match="missing"):
        load_tokenizer(tmp_path / "missing")
