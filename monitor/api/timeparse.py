"""Times in query strings: unix seconds or ISO 8601 (a naive time is UTC)."""

from __future__ import annotations

import math

from monitor.api.errors import bad_request
from monitor.timeparse import parse_timestamp


def parse_time(text: str | None, name: str, default: float) -> float:
    if text is None or text == "":
        return default
    try:
        value = parse_timestamp(text)
    except ValueError as exc:
        raise bad_request(f"{name}: {exc}") from None
    if not math.isfinite(value) or not 0 <= value < 1e11:
        raise bad_request(f"{name}={text!r}: not a time in unix seconds")
    return value


def parse_range(start: str | None, end: str | None, now: float, default_seconds: float
                ) -> tuple[float, float]:
    """(start, end): end defaults to now, start to end - default_seconds."""
    end_s = parse_time(end, "end", now)
    start_s = parse_time(start, "start", end_s - default_seconds)
    if end_s <= start_s:
        raise bad_request(f"the range is empty: end ({end_s:.0f}) is not after start "
                          f"({start_s:.0f})")
    return start_s, end_s
