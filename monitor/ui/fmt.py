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


def duration(seconds: float | None) -> str:
    """A span: "45s", "12m 30s", "3h 05m", "2d 04h"."""
    if seconds is None:
        return DASH
    whole = int(round(seconds))
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def sig(value: float | None, digits: int = 3) -> str:
    """A figure without a fixed unit (a p-value, an effect ratio): ``digits`` significant."""
    return DASH if value is None else f"{value:.{digits}g}"


def budget_basis(basis: str, observed_seconds: float | None, events: float, period: str,
                 remaining: float | None = None) -> str:
    """What a budget figure is of (the API's ``budget_basis``), and how many times over it was
    spent when overspent: "the 800 events of the 11m 43s of history seen so far: a partial
    period, not yet the 30d period's budget; 40.00x its budget spent"."""
    if basis == "partial":
        text = (f"the {number(events, 0)} events of the {duration(observed_seconds)} of "
                f"history seen so far: a partial period, not yet the {period} period's budget")
    elif basis == "period":
        text = f"the {number(events, 0)} events of the {period} period (so far)"
    else:
        return "no events yet"
    if remaining is not None and remaining < 0:
        text += f"; {rate(1.0 - remaining)} its budget spent"
    return text
