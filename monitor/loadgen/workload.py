"""What to send and when: arrival processes, length distributions, prompts.

Everything is drawn from one seeded generator, so a (workload spec, seed) pair always yields
the same requests at the same offsets: a canary's baseline and canary get identical load, and
a rerun reproduces a result.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np


class WorkloadError(ValueError):
    """A workload option or prompts file that cannot be used; the message names it."""


@dataclass(frozen=True, slots=True)
class RequestSpec:
    arrival_seconds: float          # intended send time, offset from the start of the run
    prompt: str                     # completions prompt (ignored when messages is set)
    max_tokens: int
    messages: tuple[dict[str, Any], ...] | None = None   # chat request when set
    input_tokens: int | None = None  # intended prompt length in tokens, when known


class Arrival(StrEnum):
    POISSON = "poisson"
    GAMMA = "gamma"
    CONSTANT = "constant"


def arrival_offsets(kind: Arrival | str, rate: float, count: int, rng: np.random.Generator,
                    burstiness: float = 1.0) -> np.ndarray:
    """``count`` send offsets (seconds, first at 0) at a mean of ``rate`` per second.

    ``gamma`` draws gaps from a gamma distribution of shape ``burstiness`` and mean 1/rate
    (vLLM's benchmark convention): shape 1 is Poisson, below 1 burstier, above 1 more even.
    A rate of inf sends everything at once.
    """
    kind = Arrival(kind)
    if count <= 0:
        return np.zeros(0)
    if not rate > 0:
        raise WorkloadError(f"request rate must be > 0, got {rate}")
    if burstiness <= 0:
        raise WorkloadError(f"burstiness must be > 0, got {burstiness}")
    if math.isinf(rate):
        return np.zeros(count)
    if kind is Arrival.CONSTANT:
        gaps = np.full(count, 1.0 / rate)
    elif kind is Arrival.POISSON:
        gaps = rng.exponential(1.0 / rate, count)
    else:
        gaps = rng.gamma(burstiness, 1.0 / (rate * burstiness), count)
    offsets: np.ndarray = np.cumsum(gaps)
    shifted: np.ndarray = offsets - offsets[0]
    return shifted


@dataclass(frozen=True, slots=True)
class LengthDist:
    """A token-length distribution: ``fixed:N``, ``uniform:LO-HI`` or
    ``lognormal:MEAN[,SIGMA]`` (SIGMA of the underlying normal, default 0.6)."""

    kind: str
    a: float
    b: float = 0.0

    @classmethod
    def parse(cls, text: str, what: str = "length") -> LengthDist:
        m = re.fullmatch(r"\s*(fixed|uniform|lognormal)\s*:\s*([^\s]+)\s*", text)
        if m is None:
            try:
                return cls("fixed", _positive(float(text), what, text))
            except ValueError:
                raise WorkloadError(
                    f"{what}: {text!r} is not fixed:N, uniform:LO-HI or lognormal:MEAN[,SIGMA]"
                ) from None
        kind, args = m.groups()
        try:
            if kind == "fixed":
                return cls(kind, _positive(float(args), what, text))
            if kind == "uniform":
                lo, hi = (float(x) for x in args.split("-", 1))
                if not 1 <= lo <= hi:
                    raise WorkloadError(f"{what}: {text!r} needs 1 <= LO <= HI")
                return cls(kind, lo, hi)
            parts = [float(x) for x in args.split(",")]
            if len(parts) > 2:
                raise ValueError
            sigma = parts[1] if len(parts) == 2 else 0.6
            if sigma < 0:
                raise WorkloadError(f"{what}: {text!r}: SIGMA must be >= 0")
            return cls(kind, _positive(parts[0], what, text), sigma)
        except ValueError as exc:
            if isinstance(exc, WorkloadError):
                raise
            raise WorkloadError(f"{what}: cannot read numbers in {text!r}") from None

    def sample(self, rng: np.random.Generator, count: int) -> np.ndarray:
        if self.kind == "fixed":
            values = np.full(count, self.a)
        elif self.kind == "uniform":
            values = rng.integers(int(self.a), int(self.b) + 1, count).astype(float)
        else:  # lognormal with the given mean
            mu = math.log(self.a) - self.b ** 2 / 2
            values = rng.lognormal(mu, self.b, count)
        counts: np.ndarray = np.maximum(1, np.rint(values)).astype(int)
        return counts


def _positive(value: float, what: str, text: str) -> float:
    if not value >= 1:
        raise WorkloadError(f"{what}: {text!r}: lengths must be >= 1 token")
    return value


# Common one-token English words, so a prompt of N words is about N tokens in BPE vocabularies.
_WORDS = ("the of and to in is for on that with as by at from it this be are was or an "
          "not have but can all will one more time when which their there so if about "
          "into than them out only some other new also what up use two how our work").split()


def synthetic_prompt(rng: np.random.Generator, tokens: int, chars_per_token: float) -> str:
    """A prompt of about ``tokens`` tokens: words for BPE vocabularies (chars_per_token >= 2),
    or that many characters for a byte-level tokenizer (chars_per_token 1)."""
    if chars_per_token <= 1.0:
        text = " ".join(rng.choice(_WORDS, size=tokens))
        return text[:tokens]
    words = max(1, round(tokens * chars_per_token / 4.0))  # a word plus space is ~4 chars
    return " ".join(rng.choice(_WORDS, size=words))


@dataclass(frozen=True, slots=True)
class PromptRecord:
    prompt: str
    messages: tuple[dict[str, Any], ...] | None
    max_tokens: int | None


def load_prompts(path: str | Path) -> list[PromptRecord]:
    """A JSONL file, one request per line: ``{"prompt": "..."}`` or ``{"messages": [...]}``,
    optionally with ``max_tokens`` (``output_len`` and ``text`` are accepted too). Blank lines
    and ``#`` comments are skipped; a bad line stops with its file:line."""
    records: list[PromptRecord] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise WorkloadError(f"{path}: cannot read prompts: {exc.strerror or exc}") from None
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{where}: not JSON: {exc.msg}") from None
        if not isinstance(item, dict):
            raise WorkloadError(f"{where}: expected an object, got {type(item).__name__}")
        messages = item.get("messages")
        prompt = item.get("prompt", item.get("text"))
        if messages is not None:
            if not (isinstance(messages, list) and messages
                    and all(isinstance(m, dict) and "role" in m for m in messages)):
                raise WorkloadError(f"{where}: messages must be a non-empty list of "
                                    "{role, content} objects")
            messages = tuple(messages)
        elif not isinstance(prompt, str) or not prompt:
            raise WorkloadError(f"{where}: needs a non-empty \"prompt\" or \"messages\"")
        max_tokens = item.get("max_tokens", item.get("output_len"))
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise WorkloadError(f"{where}: max_tokens must be a positive integer")
        records.append(PromptRecord(prompt or "", messages, max_tokens))
    if not records:
        raise WorkloadError(f"{path}: no prompts in the file")
    return records


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """Everything that decides the requests: the same spec and seed give the same list."""

    input_len: LengthDist = LengthDist("lognormal", 256, 0.6)
    output_len: LengthDist = LengthDist("lognormal", 128, 0.6)
    prompts: Sequence[PromptRecord] | None = None   # from a JSONL file, instead of synthetic
    chat: bool = False
    chars_per_token: float = 4.0
    arrival: Arrival = Arrival.POISSON
    burstiness: float = 1.0
    seed: int = 0

    def stream(self, rate: float) -> Iterator[RequestSpec]:
        """Requests arriving at ``rate``/s (inf: all due at once), endlessly, in chunks drawn
        from (seed, chunk) generators so that any prefix is the same whatever its length."""
        offset = 0.0
        for chunk in itertools.count():
            rng = np.random.default_rng([self.seed, chunk])
            gaps = arrival_offsets(self.arrival, rate, _CHUNK + 1, rng, self.burstiness)
            outputs = self.output_len.sample(rng, _CHUNK)
            if self.prompts:
                picks = rng.integers(0, len(self.prompts), _CHUNK)
                for i in range(_CHUNK):
                    p = self.prompts[int(picks[i])]
                    messages = p.messages
                    if messages is None and self.chat:
                        messages = ({"role": "user", "content": p.prompt},)
                    yield RequestSpec(offset + float(gaps[i]), p.prompt,
                                      p.max_tokens or int(outputs[i]), messages)
            else:
                inputs = self.input_len.sample(rng, _CHUNK)
                for i in range(_CHUNK):
                    text = synthetic_prompt(rng, int(inputs[i]), self.chars_per_token)
                    messages = ({"role": "user", "content": text},) if self.chat else None
                    yield RequestSpec(offset + float(gaps[i]), text, int(outputs[i]), messages,
                                      int(inputs[i]))
            offset += float(gaps[_CHUNK])

    def requests(self, count: int, rate: float) -> list[RequestSpec]:
        return list(itertools.islice(self.stream(rate), count))


_CHUNK = 1024
