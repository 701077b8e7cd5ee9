"""Headroom against a measured capacity: the arithmetic by hand, the load read back from a
real store, the ticket before the SLO breaches, and its /metrics series."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from monitor.alerting.book import AlertBook, AlertState
from monitor.collect.config import ConfigError, MonitorConfig, parse_config
from monitor.headroom.capacity import headroom
from monitor.headroom.load import current_load, load_series
from monitor.headroom.metrics import HeadroomCollector
from monitor.headroom.monitor import HeadroomMonitor
from monitor.loadgen.dimensions import Dimension
from monitor.collect.snapshot import GaugeStats, Snapshot, TargetState, series_key
from sqlalchemy import func, select

from monitor.collect.config import ConfigWatcher
from monitor.service.process import MonitorService, ServeSettings
from monitor.store import Store, open_store
from monitor.store.models import AlertRecord
from monitor.store.db import TargetInfo
from monitor.store.runs import finish_run, start_run
from tests.monitor.slo.test_propose import sweep_document

T0 = 1_800_000_000.0
MODEL = {"model": "tiny"}
R, P, D, F = (  # request rate, prefill, decode, in flight
    Dimension.REQUESTS, Dimension.PROMPT_TOKENS, Dimension.OUTPUT_TOKENS, Dimension.IN_FLIGHT)


def scrape(end: float, *, requests: float, prompt: float, output: float, running: float,
           waiting: float, rejected: float = 0.0, kv: float = 0.2) -> Snapshot:
    """One 15 s scrape of ``ref`` in the schema's names."""
    return Snapshot("ref", end - 15, end, TargetState.UP, counters={
        series_key("gen_ai_server_requests_total", {**MODEL, "finish_reason": "length"}):
            requests,
        series_key("gen_ai_server_request_errors_total", {**MODEL, "error_type": "rejected"}):
            rejected,
        series_key("gen_ai_server_prompt_tokens_total", MODEL): prompt,
        series_key("gen_ai_server_generation_tokens_total", MODEL): output,
    }, gauges={
        series_key("gen_ai_server_requests_running", MODEL): GaugeStats.of(running),
        series_key("gen_ai_server_requests_waiting", MODEL): GaugeStats.of(waiting),
        series_key("gen_ai_server_kv_cache_usage_ratio", MODEL): GaugeStats.of(kv),
    })


def config(capacity: str, extra: str = "") -> MonitorConfig:
    return parse_config(
        "targets:\n  - {name: ref, url: 'http://127.0.0.1:9/metrics', "
        f"capacity: {capacity}}}\n{extra}", "inferwatch.yaml")


def registered(store: Store) -> Store:
    store.register_target(TargetInfo("ref", "http://127.0.0.1:9/metrics", "auto", MODEL))
    return store


def test_headroom_is_the_least_over_dimensions_so_prefill_heavy_load_counts() -> None:
    # Half the request rate and half the decode, but 900 of 1000 prompt tokens/s: 10% left.
    found = headroom({R: 5, P: 900, D: 160, F: 2}, {R: 10, P: 1000, D: 320, F: 5})
    assert found.ratio == pytest.approx(0.1) and found.binding is P
    assert [round(p.ratio, 3) for p in found.dimensions] == [0.5, 0.1, 0.5, 0.6]


def test_dimensions_without_a_reading_are_left_out() -> None:
    found = headroom({R: 5, P: math.nan}, {R: 10, P: 1000})
    assert found.ratio == 0.5 and found.binding is R
    assert math.isnan(headroom({R: math.nan}, {R: 10}).ratio)


def test_the_load_is_read_back_from_the_store(store: Store) -> None:
    registered(store).write([scrape(T0 + 15 * k, requests=30, rejected=15, prompt=3000,
                                    output=960, running=3, waiting=1) for k in range(1, 5)])
    # 30 finished + 15 rejected per 15 s: 3 req/s; 200 prompt, 64 output tokens/s; 3 + 1
    load = current_load(store, "ref", T0, T0 + 60)
    assert load == {R: pytest.approx(3.0), P: pytest.approx(200.0),
                    D: pytest.approx(64.0), F: pytest.approx(4.0)}
    rows = load_series(store, "ref", T0, T0 + 60, 30)
    assert [t for t, _ in rows] == [T0 + 30, T0 + 60]
    assert rows[1][1] == load
    assert all(math.isnan(v) for v in current_load(store, "ref", T0 - 600, T0 - 300).values())


def test_a_growing_queue_with_low_kv_usage_warns(store: Store) -> None:
    # KV usage reads 20% while the queue grows by 8 a scrape: requests in flight (the queue)
    # are past the 4.5 the sweep held (6 req/s x 0.75 s), while the rate stays at capacity.
    registered(store)
    run_id = start_run(store.engine, "sweep", "nightly", {})
    finish_run(store.engine, run_id, sweep_document())
    store.write([scrape(T0 + 15 * k, requests=90, prompt=10800, output=3600, running=4,
                        waiting=8 * k, kv=0.2) for k in range(1, 5)])
    settings = "headroom: {warn_below_ratio: 0.2, for_seconds: 30, window_seconds: 60}"
    monitor = HeadroomMonitor(store, lambda: config("{sweep: nightly}", settings))
    (condition,) = monitor.tick(T0 + 60)
    status = monitor.statuses["ref"]
    assert status.capacity is not None and status.capacity.sweep_id == run_id
    assert status.capacity.bench_binding is P          # the sweep's own finding
    assert status.headroom.binding is F                # what binds now: the queue
    # 4 running + (8 + 16 + 24 + 32) / 4 = 24 waiting: 1 - 24 / 4.5
    assert status.headroom.ratio == pytest.approx(1 - 24 / 4.5)
    assert status.state == "low" and condition.active and condition.for_seconds == 30
    assert condition.labels == {"alertname": "InferwatchCapacityHeadroomLow", "target": "ref",
                                "severity": "ticket"}
    assert "requests_in_flight 24 requests of 4.5 requests" in condition.annotations["evidence"]
    assert condition.annotations["bench_binding_dimension"] == "prompt_tokens_per_second"
    book = AlertBook(None)
    book.update(T0 + 60, [condition])
    book.update(T0 + 90, monitor.tick(T0 + 90))
    assert [a.state for a in book.alerts()] == [AlertState.FIRING]   # after for_seconds


def test_comfortable_load_is_ok_and_numbers_can_be_given_directly(store: Store) -> None:
    registered(store).write([scrape(T0 + 15 * k, requests=30, prompt=3000, output=960,
                                    running=2, waiting=0) for k in range(1, 5)])
    numbers = "{requests_per_second: 4, output_tokens_per_second: 128}"
    monitor = HeadroomMonitor(store, lambda: config(numbers))
    (condition,) = monitor.tick(T0 + 60)
    status = monitor.statuses["ref"]
    # 2 of 4 req/s, 64 of 128 tokens/s: half left in both
    assert status.headroom.ratio == pytest.approx(0.5) and status.state == "ok"
    assert not condition.active and status.capacity is not None
    assert status.capacity.source == "configured"
    registry = CollectorRegistry()
    registry.register(HeadroomCollector(monitor))
    assert registry.get_sample_value("inferwatch_target_capacity_headroom_ratio", {
        "target": "ref", "dimension": "output_tokens_per_second"}) == pytest.approx(0.5)
    binding = registry.get_sample_value("inferwatch_target_capacity_binding_info", {
        "target": "ref", "dimension": status.headroom.binding.value if status.headroom.binding
        else "", "bench_dimension": ""})
    assert binding == 1.0


def test_a_missing_sweep_is_its_own_state_not_an_alert(store: Store) -> None:
    monitor = HeadroomMonitor(registered(store), lambda: config("{sweep: nope}"))
    (condition,) = monitor.tick(T0)
    assert not condition.active and monitor.statuses["ref"].state == "no_capacity"
    assert "no finished sweep 'nope'" in (monitor.statuses["ref"].error or "")


@pytest.mark.parametrize(("block", "message"), [
    ("{}", "give either sweep"),
    ("{sweep: a, requests_per_second: 3}", "give either sweep"),
    ("{requests_per_second: -1}", "greater than 0"),
    ("{sweeps: a}", "did you mean 'sweep'"),
], ids=["empty", "both a sweep and numbers", "a negative capacity", "a misspelt key"])
def test_bad_capacity_blocks_are_named(block: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=message):
        config(block)


def test_a_standby_shows_the_headroom_statuses_and_saves_nothing(tmp_path: Path) -> None:
    """A standby replica (monitor/service/process.py) evaluates headroom read-only each
    evaluation interval, so its API and /metrics show it as the active's do."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    (tmp_path / "inferwatch.yaml").write_text(
        f"store: {{url: '{url}'}}\n"
        "targets:\n  - {name: ref, url: 'http://127.0.0.1:9/metrics', "
        "capacity: {requests_per_second: 4, output_tokens_per_second: 128}}\n"
        "anomaly: {enabled: false}\n", encoding="utf-8")
    store = open_store(url)
    store.migrate()
    registered(store).write([scrape(T0 + 15 * k, requests=30, prompt=3000, output=960,
                                    running=2, waiting=0) for k in range(1, 5)])
    service = MonitorService(ConfigWatcher(tmp_path / "inferwatch.yaml"), [], store,
                             ServeSettings(port=0))
    try:
        assert service.state.headroom("ref") is None  # no round yet
        service._follow_active(T0 + 60, evaluate=True)
        status = service.state.headroom("ref")
        assert status is not None and status.headroom.ratio == pytest.approx(0.5)
        assert service.alerting.book.alerts() == []
        with store.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(AlertRecord)).scalar() == 0
    finally:
        store.close()
