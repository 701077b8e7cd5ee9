"""PromQLSource against a real Prometheus scraping a real reference server every second.

The load is bracketed by quiet periods: the server's own counter is read from its /metrics
before and after, and the window [t0, t1] starts after Prometheus holds the "before" value
and ends after it holds the "after" value, so the exact increase is known.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporters.schema import (
    GENERATION_TOKENS,
    KV_CACHE_BLOCKS_CAPACITY,
    REQUESTS,
    REQUESTS_RUNNING,
    TIME_TO_FIRST_TOKEN,
    get_spec,
)
from monitor.collect.collector import Collector
from monitor.collect.config import parse_config
from monitor.collect.promql import (
    AmbiguousSelectorError,
    HistogramSeries,
    PromQLQueryError,
    PromQLSource,
    RawSeries,
    counter_increase,
    histogram_delta,
)
from monitor.collect.snapshot import Snapshot, TargetState, merge_snapshots, series_key
from tests.monitor.prometheus_fixture import (
    JOB,
    RunningPrometheus,
    prometheus_binary,
    running_prometheus,
)
from tests.reference_server.server_fixture import RunningServer, running_server

SELECTOR = f'job="{JOB}"'
TINY = {"model": "tiny"}
GENERATION_KEY = series_key(get_spec(GENERATION_TOKENS).exposed_name, TINY)
NUM_REQUESTS, MAX_TOKENS = 6, 8


def take(url: str, start: float, end: float, selector: str = SELECTOR,
         **options: Any) -> Snapshot:
    async def go() -> Snapshot:
        async with httpx.AsyncClient() as client:
            source = PromQLSource(url, client, timeout=5.0, selector=selector, **options)
            return await source.snapshot("llm-1", start, end)
    return asyncio.run(go())


# --- the increase arithmetic, worked by hand ----------------------------------------------------


@pytest.mark.parametrize(("baseline", "values", "resets", "expected"), [
    (10.0, [12.0, 15.0], (), 5.0),
    (0.0, [12.0, 15.0], (), 15.0),           # a new series (no baseline) counts from 0
    (10.0, [12.0, 3.0, 5.0], (), 7.0),       # 2, then a reset to 3 (counted whole), then 2
    (10.0, [4.0, 6.0], (), 6.0),             # reset right after the baseline
    (10.0, [12.0, 13.0], (2,), 15.0),        # a sibling series saw a reset at the 2nd sample
    (10.0, [], (), 0.0),
], ids=["plain", "new-series", "reset-inside", "reset-at-first", "sibling-reset", "empty"])
def test_counter_increase_is_exact_and_reset_aware(
        baseline: float, values: list[float], resets: tuple[float, ...],
        expected: float) -> None:
    samples = [(float(at), value) for at, value in enumerate(values, start=1)]
    assert counter_increase(baseline, samples, frozenset(float(r) for r in resets)) == expected


def test_a_histogram_resets_as_a_whole() -> None:
    # The process restarted between the baseline and t=1: _count fell 10 -> 8, while the
    # le=0.1 bucket regrew from 5 to 7 and alone would look like an increase of 2.
    def series(suffix: str, value: float, le: str | None = None) -> RawSeries:
        labels = {"__name__": f"h{suffix}", **({"le": le} if le else {})}
        return RawSeries(labels, ((1.0, value),))

    bucket, inf, count = series("_bucket", 7, "0.1"), series("_bucket", 8, "+Inf"), \
        series("_count", 8)
    baselines = {frozenset(s.labels.items()): v for s, v in ((bucket, 5), (inf, 10), (count, 10))}
    delta = histogram_delta(HistogramSeries({0.1: bucket, float("inf"): inf}, None, count),
                            baselines)
    assert delta is not None
    assert (delta.bounds, delta.counts, delta.count) == ((0.1,), (7.0, 1.0), 8.0)


# --- a real Prometheus scraping a real reference server ------------------------------------------


@dataclass(frozen=True)
class Load:
    t0: float
    t1: float
    tokens_before: float  # the server's own counter, read from its /metrics
    tokens_after: float


@dataclass(frozen=True)
class Stack:
    server: RunningServer
    prometheus: RunningPrometheus
    address: str  # host:port Prometheus scrapes
    started: float


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus_binary()  # skip before loading a model when there is no Prometheus
    started = time.time()
    # Two jobs scrape the same server: a selector on the instance alone is then ambiguous.
    with running_server() as server:
        address = server.url.removeprefix("http://")
        with running_prometheus(tmp_path_factory.mktemp("prometheus"), [address],
                                jobs=(JOB, "llm-copy")) as prometheus:
            yield Stack(server, prometheus, address, started)


def server_generation_tokens(server: RunningServer) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=5.0).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == get_spec(GENERATION_TOKENS).exposed_name \
                    and sample.labels == TINY:
                return float(sample.value)
    raise AssertionError("no generation token counter on the server's /metrics")


@pytest.fixture(scope="module")
def load(stack: Stack) -> Load:
    series = f'{get_spec(GENERATION_TOKENS).exposed_name}{{{SELECTOR}}}'
    before = server_generation_tokens(stack.server)
    stack.prometheus.wait_for_value(series, before)
    t0 = time.time()
    time.sleep(0.25)  # a scrape stamped before t0 has read its counters before the load starts
    body = {"model": "tiny", "prompt": "Hello there", "max_tokens": MAX_TOKENS,
            "ignore_eos": True, "temperature": 0}
    for _ in range(NUM_REQUESTS):
        httpx.post(f"{stack.server.url}/v1/completions", json=body, timeout=30.0)\
            .raise_for_status()
    stack.server.wait_idle()
    after = server_generation_tokens(stack.server)
    stack.prometheus.wait_for_value(series, after)
    time.sleep(1.0)  # a quiet scrape more: every half of [t0, t1] then holds a scrape
    return Load(t0, time.time(), before, after)


@pytest.mark.integration
def test_generation_tokens_increase_exactly_as_the_servers_own_counter(
        stack: Stack, load: Load) -> None:
    snapshot = take(stack.prometheus.url, load.t0, load.t1)
    assert snapshot.state is TargetState.UP, snapshot.error
    assert snapshot.counters[GENERATION_KEY] == load.tokens_after - load.tokens_before
    assert load.tokens_after - load.tokens_before == NUM_REQUESTS * MAX_TOKENS


@pytest.mark.integration
def test_ttft_histogram_counts_every_completed_request(stack: Stack, load: Load) -> None:
    snapshot = take(stack.prometheus.url, load.t0, load.t1)
    ttft = snapshot.histograms[series_key(TIME_TO_FIRST_TOKEN, TINY)]
    assert ttft.count == sum(ttft.counts) == NUM_REQUESTS
    assert ttft.bounds == get_spec(TIME_TO_FIRST_TOKEN).buckets
    assert 0 < ttft.sum < ttft.count * 30
    finished = series_key(get_spec(REQUESTS).exposed_name, {**TINY, "finish_reason": "length"})
    assert snapshot.counters[finished] == NUM_REQUESTS


@pytest.mark.integration
def test_gauges_are_statistics_over_the_scrapes_in_the_window(stack: Stack, load: Load) -> None:
    snapshot = take(stack.prometheus.url, load.t0, load.t1)
    expected = stack.server.server.registry.get_sample_value(KV_CACHE_BLOCKS_CAPACITY, TINY)
    capacity = snapshot.gauges[series_key(KV_CACHE_BLOCKS_CAPACITY, TINY)]
    assert capacity.last == capacity.minimum == capacity.maximum == capacity.mean == expected
    assert capacity.num_readings >= 2  # one per scrape in the window
    assert series_key(REQUESTS_RUNNING, TINY) in snapshot.gauges


@pytest.mark.integration
def test_adjacent_windows_add_up_to_the_whole(stack: Stack, load: Load) -> None:
    middle = (load.t0 + load.t1) / 2
    whole = take(stack.prometheus.url, load.t0, load.t1)
    halves = merge_snapshots("llm-1", [take(stack.prometheus.url, load.t0, middle),
                                       take(stack.prometheus.url, middle, load.t1)])
    assert halves.counters == whole.counters
    assert {k: h.counts for k, h in halves.histograms.items()} == \
        {k: h.counts for k, h in whole.histograms.items()}


@pytest.mark.integration
def test_target_labels_are_dropped_from_keys_unless_kept(stack: Stack, load: Load) -> None:
    kept = take(stack.prometheus.url, load.t0, load.t1, keep_target_labels=True)
    key = series_key(get_spec(GENERATION_TOKENS).exposed_name,
                     {**TINY, "job": JOB, "instance": stack.address})
    assert kept.counters[key] == NUM_REQUESTS * MAX_TOKENS


@pytest.mark.integration
@pytest.mark.parametrize(("selector", "before_start"), [
    (SELECTOR, True),
    ('job="no-such-job"', False),
], ids=["window-before-the-first-scrape", "selector-matching-nothing"])
def test_no_samples_is_down_not_zeros(stack: Stack, load: Load, selector: str,
                                      before_start: bool) -> None:
    start, end = (stack.started - 120, stack.started - 60) if before_start else (load.t0, load.t1)
    snapshot = take(stack.prometheus.url, start, end, selector=selector)
    assert snapshot.state is TargetState.DOWN
    assert snapshot.error is not None and "no samples" in snapshot.error
    assert not snapshot.counters and not snapshot.gauges and not snapshot.histograms


@pytest.mark.integration
def test_a_window_opening_before_the_first_scrape_is_first_with_gauges_only(
        stack: Stack, load: Load) -> None:
    snapshot = take(stack.prometheus.url, stack.started - 10, load.t0)
    assert snapshot.state is TargetState.FIRST, snapshot.error
    assert not snapshot.counters and not snapshot.histograms
    assert series_key(KV_CACHE_BLOCKS_CAPACITY, TINY) in snapshot.gauges


@pytest.mark.integration
def test_a_malformed_selector_raises_naming_the_url_and_query(stack: Stack, load: Load) -> None:
    with pytest.raises(PromQLQueryError) as raised:
        take(stack.prometheus.url, load.t0, load.t1, selector='job="llm')
    assert raised.value.error_type == "bad_data"
    assert f"{stack.prometheus.url}/api/v1/query" in str(raised.value)
    assert 'job="llm' in str(raised.value) and "query:" in str(raised.value)


@pytest.mark.integration
def test_a_selector_matching_two_targets_raises(stack: Stack, load: Load) -> None:
    with pytest.raises(AmbiguousSelectorError, match="matches several targets"):
        take(stack.prometheus.url, load.t0, load.t1, selector=f'instance="{stack.address}"')


@pytest.mark.integration
def test_a_url_that_is_not_a_promql_api_is_down(stack: Stack, load: Load) -> None:
    snapshot = take(stack.server.url, load.t0, load.t1)
    assert snapshot.state is TargetState.DOWN
    assert snapshot.error is not None and "HTTP 404, not a PromQL API response" in snapshot.error


@pytest.mark.integration
def test_a_stopped_prometheus_is_down_with_the_connection_error(
        stack: Stack, load: Load, tmp_path: Path) -> None:
    with running_prometheus(tmp_path, [stack.address]) as prometheus:
        prometheus.stop()
        snapshot = take(prometheus.url, load.t0, load.t1)
    assert snapshot.state is TargetState.DOWN
    assert snapshot.error is not None
    assert "ConnectError" in snapshot.error and prometheus.url in snapshot.error


@pytest.mark.integration
def test_a_promql_target_of_the_collector_reads_the_same_window(stack: Stack,
                                                                load: Load) -> None:
    """inferwatch.yaml can name a Prometheus instead of a /metrics page; windows lag by
    promql_delay_seconds so that samples not yet ingested are not lost."""
    delay = 5.0
    config = parse_config(
        "targets:\n"
        f"  - {{name: via-prometheus, url: '{stack.prometheus.url}', promql_selector: "
        f"'{SELECTOR}', promql_delay_seconds: {delay}, scrape_interval_seconds: 1,\n"
        "     scrape_timeout_seconds: 0.9}\n", "test.yaml")
    now = [load.t0 + delay]
    snapshots: list[Snapshot] = []
    collector = Collector(config, snapshots.append, clock=lambda: now[0])

    async def two_windows() -> None:
        await collector.scrape_once()
        now[0] = load.t1 + delay
        await collector.scrape_once()
        await collector.aclose()

    asyncio.run(two_windows())
    first, second = snapshots
    assert first.state is TargetState.FIRST
    # As the scraper's first reading: the gauges at t0, no increases; it ends exactly where
    # the next window starts (a store refuses overlapping windows), whatever t0's sub-ms part.
    assert first.end == second.start and not first.counters
    assert series_key(REQUESTS_RUNNING, TINY) in first.gauges
    assert second.state is TargetState.UP, second.error
    assert (second.start, second.end) == pytest.approx((load.t0, load.t1))
    assert second.counters[GENERATION_KEY] == load.tokens_after - load.tokens_before
