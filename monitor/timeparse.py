"""Times as users write them: unix seconds or ISO 8601 (a time without a zone is UTC)."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_timestamp(text: str) -> float:
    """Unix seconds of ``text``; ValueError (naming the text) when it is neither form."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is neither unix seconds nor ISO 8601 "
                         "(2026-11-21T10:00:00Z)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()
