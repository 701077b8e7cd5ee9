"""Prometheus-style durations ("90s", "5m", "1h30m", "28d", "1w") as seconds, and back."""

from __future__ import annotations

import re
from typing import Final

_UNITS: Final[dict[str, float]] = {
    "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0, "y": 31536000.0,
}
_PART_RE: Final = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_WHOLE_RE: Final = re.compile(r"^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d|w|y))+$")


def parse_duration(text: str | int | float) -> float:
    """Seconds of a duration; a bare number is seconds. Raises ValueError naming the text."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a duration")
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        stripped = text.strip()
        if not _WHOLE_RE.match(stripped):
            raise ValueError(f"{text!r} is not a duration (like 30s, 5m, 1h30m, 28d, 1w)")
        seconds = sum(float(n) * _UNITS[unit] for n, unit in _PART_RE.findall(stripped))
    if not seconds > 0:
        raise ValueError(f"duration {text!r} must be positive")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest exact Prometheus spelling: 2592000 -> "30d", 5400 -> "1h30m"."""
    if seconds <= 0:
        raise ValueError(f"duration must be positive, got {seconds}")
    remaining = round(seconds * 1000)
    parts = []
    for unit in ("w", "d", "h", "m", "s", "ms"):
        size = round(_UNITS[unit] * 1000)
        if unit == "w" and remaining % size:  # "1w2d" reads worse than "9d"
            continue
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
