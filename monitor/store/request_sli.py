"""Exact SLIs from stored request events: percentiles over every request of a window (no
buckets), and goodput, as judged at the edge or against any thresholds given here.

Percentiles are numpy's linear interpolation between order statistics, the definition the
load generator (``monitor/loadgen/metrics.py``) uses, so the two agree on the same requests.
Latency percentiles count successful requests only (as the load generator's do); goodput
counts every request, a failed one as bad.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from monitor.store.request_events import RequestEventRow

PERCENTILES: Final = (50.0, 90.0, 95.0, 99.0)
LATENCIES: Final = ("ttft", "tpot", "e2e")
GROUPS: Final = ("tenant", "slo_class", "model")


@dataclass(frozen=True, slots=True)
class GoodputCriteria:
    """A request is good when it succeeded and each target given holds (None: no target).
    A request without a TPOT (fewer than two tokens) passes the TPOT check, as at the edge."""

    ttft_seconds: float | None = None
    tpot_seconds: float | None = None
    e2e_seconds: float | None = None

    def __post_init__(self) -> None:
        for target in (self.ttft_seconds, self.tpot_seconds, self.e2e_seconds):
            if target is not None and not target > 0:
                raise ValueError(f"goodput targets must be > 0 seconds, got {target}")

    def met(self, row: RequestEventRow) -> bool:
        if row.outcome != "ok":
            return False
        if self.ttft_seconds is not None and (row.ttft_seconds is None
                                              or row.ttft_seconds > self.ttft_seconds):
            return False
        if self.e2e_seconds is not None and (row.e2e_seconds is None
                                             or row.e2e_seconds > self.e2e_seconds):
            return False
        return self.tpot_seconds is None or row.tpot_seconds is None \
            or row.tpot_seconds <= self.tpot_seconds


@dataclass(frozen=True, slots=True)
class RequestSummary:
    num_requests: int
    num_good: int  # by the verdict stored with each event, or by the criteria asked for
    outcomes: dict[str, int]
    latency: dict[str, dict[str, float]] = field(default_factory=dict)  # ttft -> p50 -> s

    @property
    def goodput_ratio(self) -> float | None:
        return self.num_good / self.num_requests if self.num_requests else None


def exact_percentiles(values: Sequence[float],
                      percentiles: Sequence[float] = PERCENTILES) -> dict[str, float]:
    if not values:
        return {}
    array = np.asarray(values, dtype=float)
    return {f"p{q:g}": float(np.percentile(array, q)) for q in percentiles}


def summarize_requests(rows: Iterable[RequestEventRow],
                       criteria: GoodputCriteria | None = None,
                       percentiles: Sequence[float] = PERCENTILES) -> RequestSummary:
    """Counts, goodput and exact latency percentiles of ``rows``. Without ``criteria`` a
    request is good by the verdict the gateway gave it (its SLO class's targets)."""
    rows = list(rows)
    ok = [r for r in rows if r.outcome == "ok"]
    samples = {
        "ttft": [r.ttft_seconds for r in ok if r.ttft_seconds is not None],
        "tpot": [r.tpot_seconds for r in ok if r.tpot_seconds is not None],
        "e2e": [r.e2e_seconds for r in ok if r.e2e_seconds is not None],
    }
    good = sum(1 for r in rows if (criteria.met(r) if criteria is not None else r.good))
    latency = {name: found for name, values in samples.items()
               if (found := exact_percentiles(values, percentiles))}
    return RequestSummary(len(rows), good, dict(Counter(r.outcome for r in rows)), latency)


def summarize_by(rows: Iterable[RequestEventRow], group: str,
                 criteria: GoodputCriteria | None = None) -> dict[str, RequestSummary]:
    """One summary per value of ``group`` (tenant, slo_class or model)."""
    if group not in GROUPS:
        raise ValueError(f"group by one of {', '.join(GROUPS)}, not {group!r}")
    grouped: dict[str, list[RequestEventRow]] = defaultdict(list)
    for row in rows:
        grouped[getattr(row, group)].append(row)
    return {key: summarize_requests(grouped[key], criteria) for key in sorted(grouped)}
