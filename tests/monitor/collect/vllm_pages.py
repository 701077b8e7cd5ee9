"""The recorded vLLM 0.32 page, and later readings of it: more running requests, more engine
steps with a known number of tokens (issue 21: batch utilization of an engine that does not
export its batch limits)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

RECORDED: Final = (Path(__file__).parents[2] / "fixtures" / "engines"
                   / "vllm-0.32-cpu-live.prom").read_text(encoding="utf-8")
_SERIES: Final = '{engine="0",model_name="tiny"}'
_STEPS_BUCKET: Final = re.compile(
    r'^(vllm:iteration_tokens_total_bucket\{engine="0",le="([^"]+)",model_name="tiny"\}) (\S+)$',
    re.MULTILINE)


def _replace(page: str, series: str, value: float) -> str:
    line = re.compile(rf"^{re.escape(series)} \S+$", re.MULTILINE)
    page, found = line.subn(f"{series} {value!r}", page)
    assert found == 1, series
    return page


def _number(page: str, series: str) -> float:
    found = re.search(rf"^{re.escape(series)} (\S+)$", page, re.MULTILINE)
    assert found is not None, series
    return float(found.group(1))


def vllm_page(running: float = 0.0, steps: int = 0, tokens_per_step: int = 0) -> str:
    """The recorded page with ``running`` requests running, and ``steps`` more engine steps
    of ``tokens_per_step`` tokens each than it recorded (a bucket of the histogram's own)."""
    page = _replace(RECORDED, f"vllm:num_requests_running{_SERIES}", running)
    if not steps:
        return page

    def bucket(match: re.Match[str]) -> str:
        le, count = float(match.group(2)), float(match.group(3))
        return f"{match.group(1)} {count + steps if tokens_per_step <= le else count!r}"

    page = _STEPS_BUCKET.sub(bucket, page)
    count = f"vllm:iteration_tokens_total_count{_SERIES}"
    total = f"vllm:iteration_tokens_total_sum{_SERIES}"
    page = _replace(page, count, _number(page, count) + steps)
    return _replace(page, total, _number(page, total) + steps * tokens_per_step)
