"""log_slope_quantile: inferwatch's own percentile from buckets, interpolated along the
density's local power law read off the neighbouring buckets; PromQL's stays linear (issue 21,
bench/percentile_accuracy.py for the full check)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from exporters.buckets import (
    estimate_quantile,
    interpolate_quantile,
    latency_buckets,
    log_slope_quantile,
)

INF = math.inf
BUCKETS = latency_buckets(max_seconds=600.0)  # the E2E (request duration) layout


def exact_p99_errors(dist: object, p99s: np.ndarray) -> tuple[float, float]:
    """Worst |p99 error| of (linear, log-slope) with each bucket filled with the exact CDF."""
    worst = [0.0, 0.0]
    q99 = float(dist.ppf(0.99))  # type: ignore[attr-defined]
    for p99 in p99s:
        counts = [*dist.cdf(np.asarray(BUCKETS) * q99 / p99).tolist(), 1.0]  # type: ignore[attr-defined]
        for i, estimator in enumerate((interpolate_quantile, log_slope_quantile)):
            worst[i] = max(worst[i], abs(estimator(0.99, BUCKETS, counts) / p99 - 1))
    return worst[0], worst[1]


@pytest.mark.parametrize(
    ("dist", "linear_over"),
    [(stats.weibull_min(3.0), 0.02), (stats.lognorm(0.25), 0.02), (stats.lognorm(1.0), 0.005),
     (stats.pareto(3.0), 0.005)],
    ids=["Weibull k=3", "lognormal s=0.25", "lognormal s=1", "Pareto a=3"],
)
def test_p99_within_half_a_percent_where_linear_is_off_by_more(dist: object,
                                                                 linear_over: float) -> None:
    # p99 across the widest R20 bucket (1.40-1.60 s, ratio 1.143) and a 1.125 one (8-9 s).
    p99s = np.concatenate([np.geomspace(1.41, 1.59, 9), np.geomspace(8.1, 8.9, 5)])
    linear, log_slope = exact_p99_errors(dist, p99s)
    assert linear > linear_over
    assert log_slope < 0.005


def test_a_power_law_tail_over_equal_log_widths_is_exact() -> None:
    bounds = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
    counts = [*(1 - np.asarray(bounds) ** -2.0).tolist(), 1.0]  # Pareto a=2 from 1
    truth = 0.1 ** -0.5  # p90
    assert log_slope_quantile(0.9, bounds, counts) == pytest.approx(truth, rel=1e-12)
    assert interpolate_quantile(0.9, bounds, counts) == pytest.approx(3.6)  # 14% high


def test_stays_inside_promqls_bucket_and_agrees_on_edges_and_edge_cases() -> None:
    bounds = [0.5, 1.0, 2.0, 4.0, INF]
    counts = [5.0, 10.0, 30.0, 40.0, 44.0]
    for q in np.linspace(0.01, 0.99, 99):
        linear, refined = (f(float(q), bounds, counts)
                           for f in (interpolate_quantile, log_slope_quantile))
        edges = [0.0, *bounds]
        b = next(i for i in range(1, len(edges)) if linear <= edges[i])
        assert edges[b - 1] <= refined <= edges[b]
    assert log_slope_quantile(30 / 44, bounds, counts) == pytest.approx(2.0)  # an exact edge
    assert log_slope_quantile(0.05, bounds, counts) == interpolate_quantile(0.05, bounds, counts)
    assert log_slope_quantile(0.95, bounds, counts) == 4.0  # +Inf bucket: the last edge
    assert math.isnan(log_slope_quantile(0.5, [1.0, 2.0], [0.0, 0.0, 0.0]))
    assert log_slope_quantile(-0.1, bounds, counts) == -INF
    assert log_slope_quantile(1.1, bounds, counts) == INF


def test_empty_neighbours_give_uniform_in_log_x() -> None:
    # Everything in (1, 4]: no slope to read, so the median is the geometric midpoint.
    assert log_slope_quantile(0.5, [1.0, 4.0, 8.0], [0.0, 10.0, 10.0, 10.0]) == pytest.approx(2.0)


def test_few_observations_and_steep_neighbours_stay_finite() -> None:
    bounds = list(latency_buckets())
    rng = np.random.default_rng(3)
    for _ in range(200):
        samples = rng.lognormal(rng.uniform(-6, 3), rng.uniform(0.05, 2.0), rng.integers(1, 50))
        counts = [*np.searchsorted(np.sort(samples), bounds, side="right").tolist(),
                  len(samples)]
        for q in (0.5, 0.9, 0.99):
            refined = log_slope_quantile(q, bounds, counts)
            assert math.isfinite(refined) and refined > 0


def test_estimate_quantile_carries_both_numbers() -> None:
    bounds, counts = [1.0, 1.12, 1.25, 1.4, 1.6, INF], [10.0, 40.0, 80.0, 95.0, 99.5, 100.0]
    estimate = estimate_quantile(0.99, bounds, counts)
    assert estimate.value == interpolate_quantile(0.99, bounds, counts)
    assert estimate.refined == log_slope_quantile(0.99, bounds, counts)
    assert estimate.lower < estimate.refined < estimate.value < estimate.upper
