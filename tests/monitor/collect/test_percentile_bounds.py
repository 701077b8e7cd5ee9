"""derive's percentiles from vLLM's own (coarse) buckets carry the edges they lie between."""

from __future__ import annotations

import pytest

from exporters import schema
from exporters.buckets import EstimateKind
from monitor.collect.derive import derive
from monitor.collect.snapshot import HistogramDelta, Snapshot, TargetState, series_key
from tests.exporters.vllm_edges import vllm_edges

T0 = 1_800_000_000.0


def vllm_e2e(counts_by_edge: dict[float, float]) -> HistogramDelta:
    """An E2E delta over vLLM 0.32's edges, as the live page has them."""
    edges = vllm_edges("vllm:e2e_request_latency_seconds")
    counts = [counts_by_edge.get(edge, 0.0) for edge in edges] + [0.0]
    return HistogramDelta(edges, tuple(counts), 0.1 * sum(counts), sum(counts))


def snapshot(delta: HistogramDelta) -> Snapshot:
    key = series_key(schema.REQUEST_DURATION, {"model": "tiny"})
    return Snapshot("vllm", T0, T0 + 60, TargetState.UP, histograms={key: delta})


def test_every_request_in_vllms_first_e2e_bucket_is_p99_below_0_3() -> None:
    percentiles = derive(snapshot(vllm_e2e({0.3: 4.0}))).e2e.percentiles
    assert percentiles.p99 == pytest.approx(0.297)  # the number, kept for compatibility
    p99 = percentiles.estimate("p99")
    assert p99.kind is EstimateKind.UPPER_BOUND and (p99.lower, p99.upper) == (0.0, 0.3)
    assert p99.text(lambda s: f"{s:g} s") == "< 0.3 s"


def test_a_narrow_vllm_bucket_interpolates_and_a_wide_one_is_an_interval() -> None:
    # 50 in (0.8, 1.0], 50 in (1.0, 1.5]: p50 is the edge 1.0, p99 inside (1.0, 1.5].
    percentiles = derive(snapshot(vllm_e2e({1.0: 50.0, 1.5: 50.0}))).e2e.percentiles
    assert percentiles.estimate("p50").kind is EstimateKind.EXACT_EDGE
    p99 = percentiles.estimate("p99")
    assert p99.kind is EstimateKind.INTERPOLATED and (p99.lower, p99.upper) == (1.0, 1.5)
    # 100 in (1920, 7680]: a bucket 4x wide.
    wide = derive(snapshot(vllm_e2e({7680.0: 100.0}))).e2e.percentiles.estimate("p90")
    assert wide.kind is EstimateKind.INTERVAL and (wide.lower, wide.upper) == (1920.0, 7680.0)


def test_no_histogram_is_no_data() -> None:
    empty = Snapshot("vllm", T0, T0 + 60, TargetState.UP)
    assert derive(empty).e2e.percentiles.estimate("p99").kind is EstimateKind.NO_DATA
