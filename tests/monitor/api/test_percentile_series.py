"""The series route gives, beside each percentile point, the bucket edges it lies between and
what it may claim, on stored data with vLLM 0.32's real E2E edges (issue 21)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporters import schema
from monitor.api.routers.targets import series
from monitor.collect.snapshot import HistogramDelta, Snapshot, TargetState, series_key
from tests.exporters.vllm_edges import vllm_edges
from tests.monitor.api.conftest import build_state

T0 = 1_800_000_000.0
REQUESTS = series_key("gen_ai_server_requests_total", {"model": "tiny", "finish_reason": "stop"})
E2E = series_key(schema.REQUEST_DURATION, {"model": "tiny"})
ONLY_AVAILABILITY = """
slos:
  - name: availability
    sli: {kind: availability, errors: [timeout]}
    objective: 0.999
    window: 1d
"""


def scrape(end: float, counts_by_edge: dict[float, float]) -> Snapshot:
    edges = vllm_edges("vllm:e2e_request_latency_seconds")
    counts = [counts_by_edge.get(edge, 0.0) for edge in edges] + [counts_by_edge.get(0, 0.0)]
    return Snapshot("ref-0", end - 15, end, TargetState.UP, counters={REQUESTS: sum(counts)},
                    histograms={E2E: HistogramDelta(edges, tuple(counts), 0.0, sum(counts))})


def test_e2e_p99_points_carry_their_bounds(tmp_path: Path) -> None:
    state = build_state(tmp_path, None, ONLY_AVAILABILITY)
    # Minute 1: every request in (0, 0.3]; minute 2: in (0.8, 1.0] and (1.0, 1.5];
    # minute 3: past the last edge (the +Inf bucket, 0 here).
    minutes = [{0.3: 4.0}, {1.0: 50.0, 1.5: 50.0}, {7680.0: 1.0, 0: 99.0}]
    state.store.write([scrape(T0 + 60 * (m - 1) + 15 * (k + 1), counts)
                       for m, counts in enumerate(minutes, start=1) for k in range(4)])
    body = series(state, "ref-0", "e2e_p99_seconds", str(T0), str(T0 + 240), 60.0)
    as_json = body.model_dump(mode="json")
    assert [p[0] for p in as_json["points"]] == [e["time"] for e in as_json["estimates"]]
    first, second, third, empty = as_json["estimates"]
    assert first["kind"] == "upper_bound" and (first["lower"], first["upper"]) == (0.0, 0.3)
    assert first["value"] == pytest.approx(0.297) == as_json["points"][0][1]
    assert second["kind"] == "interpolated" and (second["lower"], second["upper"]) == (1.0, 1.5)
    assert 1.0 < second["refined"] < 1.5 and first["refined"] == first["value"]
    assert third["kind"] == "lower_bound"
    assert (third["lower"], third["upper"]) == (7680.0, None)
    assert empty["kind"] == "no_data" and empty["value"] is None
    # A metric that is not a percentile has no estimates (existing clients see no change).
    assert series(state, "ref-0", "error_ratio", str(T0), str(T0 + 240), 60.0).estimates is None
    state.store.close()
