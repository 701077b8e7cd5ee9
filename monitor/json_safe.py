"""JSON has no NaN or infinity: API bodies and JSON columns (PostgreSQL's json refuses them)
carry None instead."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None, tuples as lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
