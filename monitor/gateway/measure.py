"""Per-request timing read from an OpenAI server-sent-event stream as it passes through.

Definitions follow vLLM's benchmark (``vllm bench serve``), measured at the gateway: TTFT is
arrival to the first chunk carrying a token of any kind (reasoning included), ITL the gaps
between consecutive token chunks, TPOT (e2e - ttft) / (output tokens - 1), e2e arrival to the
last byte. The time to the first *content* token is kept apart, since reasoning models stream
``reasoning_content`` (vLLM) or ``reasoning`` deltas first.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

_EVENT_END: Final = re.compile(rb"\r?\n\r?\n")
_DONE: Final = b"[DONE]"
# vLLM's per-request metrics object (milliseconds), where the engine sends one.
ENGINE_METRIC_KEYS: Final = ("time_to_first_token_ms", "queue_time_ms", "generation_time_ms",
                             "mean_itl_ms")


class SseSplitter:
    """Cuts a byte stream into whole SSE events; a partial event waits for its end."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[bytes]:
        """The events completed by ``data``, each with its terminating blank line."""
        buffer = self._buffer + data
        events: list[bytes] = []
        start = 0
        for match in _EVENT_END.finditer(buffer):
            events.append(buffer[start:match.end()])
            start = match.end()
        self._buffer = buffer[start:]
        return events

    def rest(self) -> bytes:
        """What is left unterminated when the stream ends."""
        rest, self._buffer = self._buffer, b""
        return rest


def event_data(event: bytes) -> bytes | None:
    """The joined ``data:`` lines of one SSE event, or None if it has none."""
    lines = [line[5:].lstrip(b" ") for line in event.splitlines() if line.startswith(b"data:")]
    return b"\n".join(lines) if lines else None


@dataclass(slots=True)
class RequestTiming:
    """What the gateway saw of one request; times are ``time.perf_counter()`` seconds."""

    arrived_at: float
    first_token_at: float | None = None
    first_content_at: float | None = None
    last_token_at: float | None = None
    finished_at: float | None = None
    gaps: list[float] = field(default_factory=list)  # between consecutive token chunks
    num_token_chunks: int = 0
    prompt_tokens: int | None = None  # from usage
    completion_tokens: int | None = None  # from usage
    engine_metrics: dict[str, float] = field(default_factory=dict)  # vLLM's, milliseconds
    done: bool = False  # the stream ended with data: [DONE]
    stream_error: str | None = None  # an error event in the stream (after a 200): its type

    def token_chunk(self, now: float, content: bool) -> None:
        if self.last_token_at is None:
            self.first_token_at = now
        else:
            self.gaps.append(now - self.last_token_at)
        if content and self.first_content_at is None:
            self.first_content_at = now
        self.last_token_at = now
        self.num_token_chunks += 1

    def read_body(self, body: dict[str, Any]) -> None:
        """Usage and vLLM's per-request metrics, from a chunk or a whole response."""
        usage = body.get("usage")
        if isinstance(usage, dict):
            self.prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
            self.completion_tokens = _int_or_none(usage.get("completion_tokens"))
        metrics = body.get("metrics")
        if isinstance(metrics, dict):
            self.engine_metrics.update({key: float(value) for key in ENGINE_METRIC_KEYS
                                        if isinstance(value := metrics.get(key), int | float)})

    @property
    def ttft(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.arrived_at

    @property
    def ttfc(self) -> float | None:
        """Time to the first content token."""
        return None if self.first_content_at is None else self.first_content_at - self.arrived_at

    @property
    def e2e(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.arrived_at

    @property
    def num_output_tokens(self) -> int:
        """Usage's completion tokens, else the token chunks counted."""
        return self.completion_tokens if self.completion_tokens is not None \
            else self.num_token_chunks

    @property
    def tpot(self) -> float | None:
        """(e2e - ttft) / (output tokens - 1): the request's mean inter-token latency (None for
        a response not streamed: its tokens came at once)."""
        ttft, e2e, tokens = self.ttft, self.e2e, self.num_output_tokens
        if ttft is None or e2e is None or tokens < 2 or not self.num_token_chunks:
            return None
        return (e2e - ttft) / (tokens - 1)


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def chunk_tokens(body: dict[str, Any]) -> tuple[bool, bool]:
    """(carries a token of any kind, carries a content token) for one stream chunk."""
    any_token = content = False
    for choice in body.get("choices") or ():
        delta = choice.get("delta")
        if isinstance(delta, dict):  # chat
            if delta.get("content"):
                any_token = content = True
            elif delta.get("reasoning_content") or delta.get("reasoning") \
                    or delta.get("tool_calls"):
                any_token = True
        elif choice.get("text"):  # completions
            any_token = content = True
    return any_token, content


def is_usage_only(body: dict[str, Any]) -> bool:
    """The extra final chunk ``stream_options.include_usage`` asks for: usage, no choices."""
    return not body.get("choices") and isinstance(body.get("usage"), dict)


class StreamMeter:
    """Reads the events of one streamed response into a ``RequestTiming`` and says which to
    forward (all but the usage chunk the gateway asked for on the client's behalf)."""

    __slots__ = ("timing", "strip_usage", "_splitter")

    def __init__(self, timing: RequestTiming, strip_usage: bool) -> None:
        self.timing = timing
        self.strip_usage = strip_usage
        self._splitter = SseSplitter()

    def feed(self, data: bytes, now: float) -> bytes:
        """The bytes to forward for ``data`` received at ``now``: whole events only."""
        events = self._splitter.feed(data)
        if not events:
            return b""
        kept = [event for event in events if self._read(event, now)]
        return b"".join(kept) if len(kept) != 1 else kept[0]

    def rest(self) -> bytes:
        return self._splitter.rest()

    def _read(self, event: bytes, now: float) -> bool:
        data = event_data(event)
        if data is None:
            return True
        if data == _DONE:
            self.timing.done = True
            return True
        try:
            body = json.loads(data)
        except ValueError:
            return True  # not ours to judge; forwarded as is
        if not isinstance(body, dict):
            return True
        error = body.get("error")
        if isinstance(error, dict):
            self.timing.stream_error = str(error.get("type") or error.get("code") or "error")
            return True
        any_token, content = chunk_tokens(body)
        if any_token:
            self.timing.token_chunk(now, content)
        if "usage" in body or "metrics" in body:
            self.timing.read_body(body)
        return not (self.strip_usage and is_usage_only(body))
