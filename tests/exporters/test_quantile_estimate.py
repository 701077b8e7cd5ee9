"""estimate_quantile: a percentile from buckets as a number only where the buckets vouch for
one; a bound or an interval otherwise (issue 21)."""

from __future__ import annotations

import math

import pytest

from exporters.buckets import EstimateKind, estimate_quantile, interpolate_quantile
from tests.exporters.vllm_edges import vllm_edges

INF = math.inf


def cumulative(counts: list[float]) -> list[float]:
    out, total = [], 0.0
    for c in counts:
        total += c
        out.append(total)
    return out


def test_everything_in_vllms_first_e2e_bucket_is_an_upper_bound() -> None:
    # Issue 21: 4 requests of ~0.1 s, all in vLLM's first E2E bucket (0, 0.3].
    edges = vllm_edges("vllm:e2e_request_latency_seconds")
    assert edges[:3] == (0.3, 0.5, 0.8)
    counts = cumulative([4.0] + [0.0] * len(edges))
    estimate = estimate_quantile(0.99, edges, counts)
    assert estimate.kind is EstimateKind.UPPER_BOUND
    assert (estimate.lower, estimate.upper) == (0.0, 0.3)
    assert estimate.value == pytest.approx(0.297)  # PromQL's number, kept, never shown alone
    assert estimate.text(lambda s: f"{s:g} s") == "< 0.3 s"
    assert estimate.is_bound


def test_the_inf_bucket_is_a_lower_bound() -> None:
    estimate = estimate_quantile(0.99, [1.0, 2.0, 10.0], [10.0, 20.0, 30.0, 40.0])
    assert estimate.kind is EstimateKind.LOWER_BOUND
    assert (estimate.lower, estimate.upper, estimate.value) == (10.0, INF, 10.0)
    assert estimate.text(lambda s: f"{s:g} s") == "> 10 s"


def test_a_narrow_bucket_is_interpolated() -> None:
    # 10 in (0, 1], 20 in (1, 1.12], 10 in (1.12, 2]: p50 is 10 of 20 into (1, 1.12].
    estimate = estimate_quantile(0.5, [1.0, 1.12, 2.0, INF], [10.0, 30.0, 40.0, 40.0])
    assert estimate.kind is EstimateKind.INTERPOLATED
    assert estimate.value == pytest.approx(1.06)
    assert (estimate.lower, estimate.upper) == (1.0, 1.12)
    assert estimate.text(lambda s: f"{s:.2f}") == "1.06"
    assert not estimate.is_bound


def test_a_bucket_wider_than_twice_its_lower_edge_is_an_interval() -> None:
    # vLLM's TTFT has (0.1, 0.25] (ratio 2.5) and (0.25, 0.5] (ratio 2, still interpolated).
    edges = vllm_edges("vllm:time_to_first_token_seconds")
    i = edges.index(0.25)
    counts = [0.0] * (len(edges) + 1)
    counts[i - 1], counts[i] = 50.0, 50.0   # 50 in (0.08, 0.1], 50 in (0.1, 0.25]
    estimate = estimate_quantile(0.9, edges, cumulative(counts))
    assert estimate.kind is EstimateKind.INTERVAL
    assert (estimate.lower, estimate.upper) == (0.1, 0.25)
    assert estimate.text(lambda s: f"{s * 1000:g} ms") == "100 ms – 250 ms"
    counts[i - 1], counts[i], counts[i + 1] = 0.0, 50.0, 50.0  # now 50 in (0.25, 0.5]
    assert estimate_quantile(0.9, edges, cumulative(counts)).kind is EstimateKind.INTERPOLATED


def test_a_rank_exactly_on_an_edge_is_that_edge() -> None:
    # 90 of 100 at or below 2.0: p90 is exactly "<= 2.0", a count.
    estimate = estimate_quantile(0.9, [1.0, 2.0, 4.0], [50.0, 90.0, 100.0, 100.0])
    assert estimate.kind is EstimateKind.EXACT_EDGE
    assert estimate.value == 2.0 and (estimate.lower, estimate.upper) == (1.0, 2.0)


def test_no_observations_is_no_data() -> None:
    estimate = estimate_quantile(0.99, [1.0, 2.0], [0.0, 0.0, 0.0])
    assert estimate.kind is EstimateKind.NO_DATA and math.isnan(estimate.value)


@pytest.mark.parametrize("q", [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0])
def test_the_value_is_promqls_number(q: float) -> None:
    bounds, counts = [0.5, 1.0, 2.0, 4.0, INF], [5.0, 10.0, 30.0, 40.0, 44.0]
    assert estimate_quantile(q, bounds, counts).value == interpolate_quantile(q, bounds, counts)
