"""The summary route: one target over a window, counts exact, gauges over their readings and
percentiles with the bucket edges they lie between, on stored data with vLLM 0.32's real TTFT
and E2E edges (issue 21)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporters import schema
from monitor.api.errors import ApiError
from monitor.api.routers.targets import summary
from monitor.collect.snapshot import (
    GaugeStats,
    HistogramDelta,
    Snapshot,
    TargetState,
    series_key,
)
from tests.exporters.vllm_edges import vllm_edges
from tests.monitor.api.conftest import build_state

T0 = 1_800_000_000.0
ONLY_AVAILABILITY = """
slos:
  - name: availability
    sli: {kind: availability, errors: [timeout]}
    objective: 0.999
    window: 1d
"""
LABELS = {"model": "tiny"}


def counter(metric: str, **labels: str) -> str:
    return series_key(schema.get_spec(metric).exposed_name, {**LABELS, **labels})


def histogram(family: str, in_bucket_above: float | None, count: float) -> HistogramDelta:
    """``count`` observations in the bucket whose upper edge is ``in_bucket_above``."""
    edges = vllm_edges(family)
    counts = [count if edge == in_bucket_above else 0.0 for edge in edges] + [0.0]
    return HistogramDelta(edges, tuple(counts), 0.2 * count, count)


def scrape(k: int) -> Snapshot:
    """15 s of a vLLM target: 5 requests of 20 prompt tokens, 15 of them prefix-cache hits,
    and 10 generated tokens; first tokens in (0.1, 0.25], whole requests under 0.3 s."""
    return Snapshot(
        "vllm-0", T0 + 15 * k, T0 + 15 * (k + 1), TargetState.UP,
        counters={counter(schema.PROMPT_TOKENS): 25.0,
                  counter(schema.PROMPT_TOKENS_CACHED): 75.0,
                  counter(schema.GENERATION_TOKENS): 50.0,
                  counter(schema.REQUESTS, finish_reason="length"): 5.0,
                  counter(schema.PREEMPTIONS): 0.0,
                  counter(schema.PREFIX_CACHE_HITS): 75.0,
                  counter(schema.PREFIX_CACHE_QUERIES): 100.0},
        gauges={series_key(schema.REQUESTS_RUNNING, LABELS): GaugeStats.of(k + 1.0),
                series_key(schema.REQUESTS_WAITING, LABELS): GaugeStats.of(0.0),
                series_key(schema.KV_CACHE_USAGE_RATIO, LABELS): GaugeStats.of(0.1 * (k + 1))},
        histograms={
            series_key(schema.TIME_TO_FIRST_TOKEN, LABELS):
                histogram("vllm:time_to_first_token_seconds", 0.25, 5.0),
            series_key(schema.REQUEST_DURATION, LABELS):
                histogram("vllm:e2e_request_latency_seconds", 0.3, 5.0)})


def test_a_minute_of_a_vllm_target_summed_with_its_bounds(tmp_path: Path) -> None:
    state = build_state(tmp_path, None, ONLY_AVAILABILITY,
                        "targets: [{name: vllm-0, url: 'http://127.0.0.1:9/metrics'}]\n")
    state.store.write([scrape(k) for k in range(4)])
    body = summary(state, "vllm-0", str(T0), str(T0 + 60)).model_dump(mode="json")
    assert (body["state"], body["error"], body["seconds_with_data"]) == ("up", None, 60.0)
    assert (body["prompt_tokens"], body["prompt_tokens_cached"]) == (100.0, 300.0)
    assert (body["generation_tokens"], body["requests_finished"]) == (200.0, 20.0)
    assert body["preemptions"] == 0.0  # exported and none happened: 0, not null
    assert body["prompt_tokens_per_second"] == pytest.approx(100 / 60)
    assert body["generation_tokens_per_second"] == pytest.approx(200 / 60)
    assert body["prefix_cache_hit_ratio"] == pytest.approx(0.75)
    assert body["requests_running"] == {"mean": 2.5, "max": 4.0}
    assert body["requests_waiting"] == {"mean": 0.0, "max": 0.0}
    assert body["kv_cache_usage_ratio"] == pytest.approx({"mean": 0.25, "max": 0.4})
    ttft, e2e = body["latency"]["ttft"], body["latency"]["e2e"]
    assert set(body["latency"]) == {"ttft", "e2e"}  # what was stored, no more
    assert (ttft["count"], ttft["mean_seconds"]) == (20.0, pytest.approx(0.2))
    # 0.1-0.25 s is 2.5x wide: only the interval is claimed; E2E's first bucket only "< 0.3".
    assert {q: (p["kind"], p["lower"], p["upper"]) for q, p in ttft["percentiles"].items()} \
        == {q: ("interval", 0.1, 0.25) for q in ("p50", "p90", "p95", "p99")}
    assert {(p["kind"], p["lower"], p["upper"]) for p in e2e["percentiles"].values()} \
        == {("upper_bound", 0.0, 0.3)}
    state.store.close()


def test_a_window_without_scrapes_is_down_with_null_counts(tmp_path: Path) -> None:
    state = build_state(tmp_path, None, ONLY_AVAILABILITY,
                        "targets: [{name: vllm-0, url: 'http://127.0.0.1:9/metrics'}]\n")
    state.store.write([scrape(0)])
    body = summary(state, "vllm-0", str(T0 + 60), str(T0 + 120)).model_dump(mode="json")
    assert (body["state"], body["error"]) == ("down", "no data")
    assert body["generation_tokens"] is None and body["latency"] == {}
    with pytest.raises(ApiError) as missing:
        summary(state, "nowhere", str(T0), str(T0 + 60))
    assert missing.value.status == 404
    state.store.close()
