"""Percentile series with their bucket edges (issue 21): beside each point's number, the
edges it lies between and whether the buckets vouch for a number, an interval or a bound."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

from exporters.buckets import EstimateKind, QuantileEstimate
from monitor.anomaly.features import PERCENTILE_FEATURES, read_percentile_estimates
from monitor.api.schemas import PercentileOut, PercentilePointOut
from monitor.store import Store

# Series metric -> (histogram, quantile): the percentile figures the series route serves.
PERCENTILE_METRICS: Final = PERCENTILE_FEATURES


def estimates_by_end(store: Store, target: str, metric: str, start: float, end: float,
                     step: float) -> dict[float, QuantileEstimate]:
    """The percentile estimate of each step of (start, end] that observed something."""
    return read_percentile_estimates(store, target, metric, start, end, step)


def percentile_points(store: Store, target: str, metric: str, ends: Sequence[float],
                      step: float) -> list[PercentilePointOut]:
    """One entry per step end of ``ends`` (the series' points), in their order."""
    if not ends:
        return []
    found = estimates_by_end(store, target, metric, ends[0] - step, ends[-1], step)
    return [point_out(t, found.get(round(t, 3))) for t in ends]


def point_out(t: float, estimate: QuantileEstimate | None) -> PercentilePointOut:
    return PercentilePointOut(time=t, **estimate_out(estimate).model_dump())


def estimate_out(estimate: QuantileEstimate | None) -> PercentileOut:
    if estimate is None or estimate.kind is EstimateKind.NO_DATA:
        return PercentileOut(value=None, lower=None, upper=None, kind="no_data")
    return PercentileOut(value=_finite(estimate.value), refined=_finite(estimate.refined),
                         lower=_finite(estimate.lower),
                         upper=_finite(estimate.upper),
                         kind=estimate.kind.value)  # type: ignore[arg-type]


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
