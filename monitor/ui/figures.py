"""The overview's per-target figures, read for every target at once.

Per target, per minute of the last ten, the same figures the series route gives (tokens/s,
p99 TTFT and ITL, peak KV-cache usage, batch utilization), derived from that minute's window
(``monitor.collect.derive``); the overview shows each figure's latest finite value. One bulk
read of every target per minute (``window_by_target``) instead of a series read per target
and figure: 200 targets cost about ten reads, not 17,000 statements (bench/ui_load.py).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Final

from exporters import schema
from exporters.buckets import estimate_quantile
from monitor.collect.derive import Derived, derive, merged_histogram
from monitor.collect.limits import BatchSource
from monitor.collect.snapshot import Snapshot, TargetState
from monitor.store import Store
from monitor.store.queries import Selector, window_by_target
from monitor.ui.fmt import millis

FIGURES: Final = ("tokens_per_second", "ttft_p99_seconds", "itl_p99_seconds",
                  "kv_cache_usage_ratio", "batch_utilization")
FIGURE_STEP_SECONDS: Final = 60.0
FIGURE_RANGE_SECONDS: Final = 600.0


@dataclass
class TargetFigures:
    values: dict[str, float | None] = field(default_factory=lambda: dict.fromkeys(FIGURES))
    # Percentile figures the buckets only bound ("< 300.0 ms": all in the first bucket;
    # issue 21), shown instead of the number, which stays in ``values``.
    bounded: dict[str, str] = field(default_factory=dict)
    # What the batch utilization shown is computed against (monitor/collect/limits.py).
    batch_source: BatchSource | None = None


def _figures(snapshot: Snapshot) -> tuple[dict[str, tuple[float, str | None]],
                                          BatchSource | None]:
    """Each figure's value in one minute, with its bound text where it is only a bound, and
    what the batch utilization is computed against.

    derive() without the histograms gives the scalars; the two p99s are estimated alone:
    derive would estimate every quantile of every latency histogram, 12 times the work the
    page needs (most of the overview's CPU with 200 targets)."""
    steps = {key: delta for key, delta in snapshot.histograms.items()  # the token budget's
             if key.partition("{")[0] == schema.ITERATION_TOKENS}
    d: Derived = derive(dataclasses.replace(snapshot, histograms=steps))
    out: dict[str, tuple[float, str | None]] = {
        # As the series route counts it: a token counter the answering target does not
        # export adds nothing (derive says NaN: not exported).
        "tokens_per_second": (_zero_if_nan(d.prompt_tokens_per_second)
                              + _zero_if_nan(d.generation_tokens_per_second), None),
        "kv_cache_usage_ratio": (d.kv_cache_usage_ratio_max, None),
        "batch_utilization": (d.batch_utilization, None),
    }
    for figure, name in (("ttft_p99_seconds", schema.TIME_TO_FIRST_TOKEN),
                         ("itl_p99_seconds", schema.INTER_TOKEN_LATENCY)):
        histogram = merged_histogram(snapshot, name)
        if histogram is None or not histogram.count > 0:  # nothing observed: no percentile
            out[figure] = (math.nan, None)
            continue
        estimate = estimate_quantile(0.99, histogram.bounds, histogram.cumulative())
        out[figure] = (estimate.value, estimate.text(millis) if estimate.is_bound else None)
    return out, d.batch_utilization_source


def _zero_if_nan(value: float) -> float:
    return 0.0 if math.isnan(value) else value


def latest_figures(store: Store, end: float) -> dict[str, TargetFigures]:
    """Target name -> the latest finite value of each figure over the minutes ending in
    (end - FIGURE_RANGE_SECONDS, end]; targets with nothing stored are left out."""
    found: dict[str, TargetFigures] = {}
    steps = int(FIGURE_RANGE_SECONDS // FIGURE_STEP_SECONDS)
    for k in range(steps - 1, -1, -1):  # oldest first: a later minute overwrites
        hi = end - k * FIGURE_STEP_SECONDS
        for name, snapshot in window_by_target(store, Selector(), hi - FIGURE_STEP_SECONDS,
                                               hi).items():
            if snapshot.state is TargetState.DOWN:
                continue
            target = found.setdefault(name, TargetFigures())
            values, batch_source = _figures(snapshot)
            if batch_source is not None:  # with the batch utilization it says how to read
                target.batch_source = batch_source
            for figure, (value, bound) in values.items():
                if math.isfinite(value):
                    target.values[figure] = value
                    if bound is None:
                        target.bounded.pop(figure, None)
                    else:
                        target.bounded[figure] = bound
    return found
