"""A stored canary whose percentiles are only bounds of an engine's buckets says so instead of
claiming a precise shift (issue 21)."""

from __future__ import annotations

from exporters import schema
from monitor.canary.config import load_judge_config
from monitor.canary.judge import Verdict
from monitor.canary.run import judge_stored
from monitor.collect.snapshot import HistogramDelta, Snapshot, TargetState, series_key
from monitor.store import Store
from tests.exporters.vllm_edges import vllm_edges

T0 = 1_800_000_000.0
MODEL = {"model": "m"}


def minute(target: str, end: float, edges: tuple[float, ...], first: float) -> Snapshot:
    """300 requests; ``first`` of them in the first E2E bucket, the rest just above it."""
    counts = [first, 300.0 - first] + [0.0] * (len(edges) - 1)
    requests = series_key(schema.get_spec(schema.REQUESTS).exposed_name,
                          {**MODEL, "finish_reason": "stop"})
    return Snapshot(target, end - 60, end, TargetState.UP, counters={requests: 300.0},
                    histograms={series_key(schema.REQUEST_DURATION, MODEL): HistogramDelta(
                        edges, tuple(counts), 30.0, 300.0)})


def test_e2e_p99s_in_vllms_first_bucket_are_flagged_as_bounds(store: Store) -> None:
    edges = vllm_edges("vllm:e2e_request_latency_seconds")
    store.write([minute(name, T0 + 60 * k, edges, 300.0 if name == "old" or k % 2 else 290.0)
                 for k in range(1, 31) for name in ("old", "new")])
    comparison = judge_stored(store, "old", "new", T0, T0 + 1800, 60, load_judge_config(None))
    note = comparison.percentile_bounds["e2e_p99"]
    assert "only bounds in 30/30 baseline and 15/30 canary intervals" in note
    e2e = next(r for r in comparison.judgement.results if r.name == "e2e_p99")
    assert e2e.verdict is not Verdict.NODATA and note in e2e.reason
    assert comparison.to_json()["percentile_bounds"]["e2e_p99"] == note
    assert "ttft_p99" not in comparison.percentile_bounds  # no TTFT stored: nothing to flag
