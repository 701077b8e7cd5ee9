"""How the UI writes numbers: the tests format the JSON API's values with these same functions
and look for them in the pages."""

from __future__ import annotations

import datetime as dt

DASH = "—"


def percent(value: float | None, digits: int = 3) -> str:
    return DASH if value is None else f"{value * 100:.{digits}f}%"


def rate(value: float | None) -> str:
    """A burn rate: how many times faster than the budget allows."""
    return DASH if value is None else f"{value:.2f}x"


def number(value: float | None, digits: int = 1) -> str:
    return DASH if value is None else f"{value:,.{digits}f}"


def millis(seconds: float | None) -> str:
    return DASH if seconds is None else f"{seconds * 1000:.1f} ms"


def when(unix_seconds: float | None) -> str:
    if unix_seconds is None:
        return DASH
    return dt.datetime.fromtimestamp(unix_seconds, dt.UTC).strftime(
        "%Y-%m-%d %H:%M:%S UTC")


def sig(value: float | None, digits: int = 3) -> str:
    """A figure without a fixed unit (a p-value, an effect ratio): ``digits`` significant."""
    return DASH if value is None else f"{value:.{digits}g}"
