"""Tokenizers (built-in byte-level, or a HF tokenizer.json) and incremental detokenization."""

from __future__ import annotations

import codecs
import json
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn, Protocol

import jinja2
import jinja2.ext
import jinja2.sandbox
import tokenizers

logger = logging.getLogger(__name__)

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
CHAT_TEMPLATE_FILE = "chat_template.jinja"
# How many prompt tokens to decode as left context for the first generated token (as vLLM).
_NUM_CONTEXT_TOKENS = 5


class Tokenizer(Protocol):
    vocab_size: int
    bos_token_id: int | None
    eos_token_ids: tuple[int, ...]

    def encode(self, text: str, add_bos: bool = True) -> list[int]: ...

    def decode(self, token_ids: Sequence[int]) -> str: ...

    def apply_chat_template(self, messages: Sequence[Mapping[str, str]]) -> str: ...


def _checked_messages(messages: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for i, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str) or not role or not isinstance(content, str):
            raise ValueError(f"messages[{i}] needs a non-empty string 'role' and a string "
                             "'content'")
        out.append(dict(message))
    return out


def simple_chat_template(messages: Sequence[Mapping[str, str]]) -> str:
    """'<|role|>\\ncontent\\n' per message, then the assistant opener."""
    turns = [f"<|{m['role']}|>\n{m['content']}\n" for m in _checked_messages(messages)]
    return "".join(turns) + "<|assistant|>\n"


class ByteTokenizer:
    """UTF-8 bytes are tokens 0..255; then BOS 256, EOS 257, PAD 258; up to 263 reserved."""

    NUM_BYTE_TOKENS = 256
    BOS = 256
    EOS = 257
    PAD = 258

    def __init__(self) -> None:
        self.vocab_size: int = 264
        self.bos_token_id: int | None = self.BOS
        self.eos_token_ids: tuple[int, ...] = (self.EOS,)
        self.pad_token_id: int = self.PAD

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        ids = list(text.encode("utf-8"))
        return [self.BOS, *ids] if add_bos else ids

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.token_bytes(token_ids).decode("utf-8", errors="replace")

    def token_bytes(self, token_ids: Sequence[int]) -> bytes:
        """The raw bytes of the byte tokens; special and reserved ids contribute nothing."""
        return bytes(t for t in token_ids if 0 <= t < self.NUM_BYTE_TOKENS)

    def apply_chat_template(self, messages: Sequence[Mapping[str, str]]) -> str:
        return simple_chat_template(messages)


# --------------------------------------------------------------------------------------------
# HF tokenizer.json
# --------------------------------------------------------------------------------------------

def _read_json(path: Path) -> dict[str, Any]:
    """The JSON object in `path`, or {} when the file does not exist."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is not readable JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path} must contain a JSON object")
    return data


def _token_content(value: Any) -> str | None:
    """tokenizer_config.json stores special tokens as a string or an AddedToken dict."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def _id_list(value: Any) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def _raise_template_exception(message: str) -> NoReturn:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    # Same as transformers' override: jinja2's own tojson HTML-escapes, which templates don't want.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def _compile_chat_template(source: str, origin: Path) -> jinja2.Template:
    """Compiles a HF chat template in the same sandboxed environment transformers uses."""
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_template_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        return env.from_string(source)
    except jinja2.exceptions.TemplateError as exc:
        raise ValueError(f"chat template in {origin} does not compile: {exc}") from exc


def _find_chat_template(root: Path, tokenizer_config: dict[str, Any]) -> tuple[str, Path] | None:
    jinja_file = root / CHAT_TEMPLATE_FILE
    if jinja_file.is_file():
        return jinja_file.read_text(encoding="utf-8"), jinja_file
    template = tokenizer_config.get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": ..., "template": ...}]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if isinstance(template, str) and template:
        return template, root / TOKENIZER_CONFIG_FILE
    return None


class HFTokenizer:
    """A HF `tokenizer.json` plus the special tokens and chat template stored beside it."""

    def __init__(self, model_dir: str | Path) -> None:
        root = Path(model_dir)
        path = root / TOKENIZER_FILE
        try:
            self._tokenizer = tokenizers.Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust side raises a plain Exception
            raise ValueError(f"cannot load tokenizer {path}: {exc}") from exc
        tokenizer_config = _read_json(root / TOKENIZER_CONFIG_FILE)
        self.vocab_size: int = self._tokenizer.get_vocab_size(with_added_tokens=True)
        self.bos_token_id: int | None = None
        self.eos_token_ids: tuple[int, ...] = ()
        self._resolve_special_tokens(root, tokenizer_config)
        self.bos_token = self._token_text(self.bos_token_id)
        self.eos_token = self._token_text(self.eos_token_ids[0] if self.eos_token_ids else None)
        found = _find_chat_template(root, tokenizer_config)
        self._chat_template = None if found is None else _compile_chat_template(*found)

    def _resolve_special_tokens(self, root: Path, tokenizer_config: dict[str, Any]) -> None:
        """BOS: tokenizer_config, then generation_config, then config. EOS: the union of all."""
        configs = [_read_json(root / "generation_config.json"), _read_json(root / "config.json")]
        bos_ids = self._ids_of(tokenizer_config.get("bos_token"))
        eos_ids = self._ids_of(tokenizer_config.get("eos_token"))
        for config in configs:
            bos_ids += _id_list(config.get("bos_token_id"))
            eos_ids += _id_list(config.get("eos_token_id"))
        self.bos_token_id = bos_ids[0] if bos_ids else None
        self.eos_token_ids = tuple(dict.fromkeys(eos_ids))  # dedupe, keep order

    def _ids_of(self, token: Any) -> list[int]:
        content = _token_content(token)
        token_id = None if content is None else self._tokenizer.token_to_id(content)
        return [] if token_id is None else [token_id]

    def _token_text(self, token_id: int | None) -> str:
        text = None if token_id is None else self._tokenizer.id_to_token(token_id)
        return text or ""

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        # Special tokens are added here rather than by the post-processor so that add_bos means
        # the same for every tokenizer; a BOS already in the text (chat templates) is not doubled.
        ids: list[int] = self._tokenizer.encode(text, add_special_tokens=False).ids
        if add_bos and self.bos_token_id is not None and ids[:1] != [self.bos_token_id]:
            ids.insert(0, self.bos_token_id)
        return ids

    def decode(self, token_ids: Sequence[int]) -> str:
        return str(self._tokenizer.decode(list(token_ids), skip_special_tokens=True))

    def apply_chat_template(self, messages: Sequence[Mapping[str, str]]) -> str:
        checked = _checked_messages(messages)
        if self._chat_template is None:
            return simple_chat_template(checked)
        try:
            return self._chat_template.render(
                messages=checked, add_generation_prompt=True,
                bos_token=self.bos_token, eos_token=self.eos_token)
        except jinja2.exceptions.TemplateError as exc:
            raise ValueError(f"chat template rejected the messages: {exc}") from exc


def load_tokenizer(model_dir: str | Path | None) -> Tokenizer:
    """None -> ByteTokenizer; a dir with tokenizer.json -> HFTokenizer; else ByteTokenizer."""
    if model_dir is None:
        return ByteTokenizer()
    root = Path(model_dir)
    if not root.is_dir():
        raise ValueError(f"tokenizer directory {root} does not exist or is not a directory")
    if (root / TOKENIZER_FILE).is_file():
        return HFTokenizer(root)
    logger.warning("no %s in %s; falling back to the byte-level tokenizer", TOKENIZER_FILE, root)
    return ByteTokenizer()


# --------------------------------------------------------------------------------------------
# Incremental detokenization
# --------------------------------------------------------------------------------------------

class IncrementalDetokenizer:
    """Turns generated tokens into text deltas, never emitting a partial character.

    Byte tokenizer: an incremental UTF-8 decoder holds back incomplete sequences exactly.
    Other tokenizers: the prefix-offset / read-offset technique of vLLM and TGI. The text of
    ids[prefix:read] was already emitted; decoding ids[prefix:] with that left context keeps
    leading spaces and multi-token characters right, and a trailing U+FFFD means "incomplete,
    wait for the next token".
    """

    def __init__(self, tokenizer: Tokenizer, prompt_token_ids: Sequence[int] = ()) -> None:
        self._tokenizer = tokenizer
        self._byte_tokenizer = tokenizer if isinstance(tokenizer, ByteTokenizer) else None
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._token_ids = list(prompt_token_ids)
        self._read_offset = len(self._token_ids)
        self._prefix_offset = max(self._read_offset - _NUM_CONTEXT_TOKENS, 0)

    def push(self, token_id: int) -> str:
        """The new text completed by `token_id` (possibly "")."""
        if self._byte_tokenizer is not None:
            return self._utf8.decode(self._byte_tokenizer.token_bytes((token_id,)))
        self._token_ids.append(token_id)
        return self._advance(final=False)

    def flush(self) -> str:
        """Whatever is still held back (an incomplete character decodes as U+FFFD)."""
        if self._byte_tokenizer is not None:
            return self._utf8.decode(b"", final=True)
        return self._advance(final=True)

    def _advance(self, final: bool) -> str:
        if self._read_offset == len(self._token_ids):
            return ""
        decode = self._tokenizer.decode
        prefix_text = decode(self._token_ids[self._prefix_offset:self._read_offset])
        new_text = decode(self._token_ids[self._prefix_offset:])
        if len(new_text) <= len(prefix_text) or (new_text.endswith("\ufffd") and not final):
            return ""
        self._prefix_offset = self._read_offset
        self._read_offset = len(self._token_ids)
        return new_text[len(prefix_text):]
