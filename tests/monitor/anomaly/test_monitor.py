"""The anomaly monitor over the store (SQLite and PostgreSQL): features per step, a throughput
drop at the same load becomes one diagnosed alert, a restart resumes the same state, and the
alerts reach the alert book and Alertmanager's form through the alerting loop."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from exporters import schema
from monitor.alerting.book import AlertBook, AlertState
from monitor.alerting.loop import AlertingLoop
from monitor.anomaly.detectors import Level, Reading
from monitor.anomaly.diagnosis import diagnose
from monitor.anomaly.features import OFFERED_LOAD, THROUGHPUT, read_features
from monitor.anomaly.monitor import ANOMALY_ALERT, AnomalyMonitor
from monitor.anomaly.params import AnomalyParams
from monitor.collect.snapshot import GaugeStats, Snapshot, TargetState, series_key
from monitor.store import Store

T0 = 1_800_000_000.0  # a multiple of 60
MODEL = {"model": "tiny"}


def minute(target: str, end: float, *, requests: float, tokens: float, waiting: float = 0.0,
           kv: float = 0.3, running: float = 8.0) -> Snapshot:
    """One scrape a minute: requests and tokens, in-flight gauges, KV usage."""
    counters = {
        series_key("gen_ai_server_requests_total", {**MODEL, "finish_reason": "stop"}): requests,
        series_key("gen_ai_server_generation_tokens_total", MODEL): tokens,
        series_key("gen_ai_server_prompt_tokens_total", MODEL): tokens / 4,
        series_key("gen_ai_server_request_errors_total", {**MODEL, "error_type": "rejected"}):
            0.0,
    }
    gauges = {
        series_key(schema.REQUESTS_RUNNING, MODEL): GaugeStats(running, running * 4, 4, running,
                                                               running),
        series_key(schema.REQUESTS_WAITING, MODEL): GaugeStats(waiting, waiting * 4, 4, waiting,
                                                               waiting),
        series_key(schema.BATCH_SIZE_MAX, MODEL): GaugeStats(32.0, 128.0, 4, 32.0, 32.0),
        series_key(schema.KV_CACHE_USAGE_RATIO, MODEL): GaugeStats(kv, kv * 4, 4, kv, kv),
    }
    return Snapshot(target, end - 60, end, TargetState.UP, counters=counters, gauges=gauges)


def history(store: Store, minutes: int, drop_at: int | None = None, t0: float = T0) -> None:
    """``minutes`` of target "a" at 600 requests/min; from ``drop_at`` the same requests give
    40% of the tokens (requests queue: waiting grows by 5 a minute)."""
    snapshots = []
    for k in range(1, minutes + 1):
        wiggle = 1 + 0.02 * math.sin(k * 1.7)
        dropped = drop_at is not None and k > drop_at
        queue = 5.0 * (k - drop_at) if dropped and drop_at is not None else 0.0
        snapshots.append(minute("a", t0 + 60 * k, requests=600 * wiggle,
                                tokens=60_000 * wiggle * (0.4 if dropped else 1.0),
                                waiting=queue))
    store.write(snapshots)


def test_features_per_step(store: Store) -> None:
    history(store, 5)
    rows = read_features(store, "a", T0, T0 + 300, 60)
    assert [t for t, _ in rows] == [T0 + 60 * k for k in range(1, 6)]
    row = rows[2][1]
    wiggle = 1 + 0.02 * math.sin(3 * 1.7)
    assert row[THROUGHPUT] == pytest.approx((60_000 + 15_000) * wiggle / 60)
    assert row[OFFERED_LOAD] == pytest.approx(600 * wiggle / 60)
    assert row["kv_cache_usage_ratio"] == 0.3 and row["batch_utilization"] == 8 / 32
    assert row["error_ratio"] == 0.0 and row["queue_depth"] == 0.0
    assert math.isnan(row["ttft_p99_seconds"])  # not exported here: NaN, not 0


PAGE_ON_THROUGHPUT = frozenset({THROUGHPUT})


def test_by_default_an_anomaly_is_a_ticket_never_a_page(store: Store) -> None:
    """Pages come from SLO burn rates: the same critical drop is only a ticket unless the
    operator turns paging on for tokens/s."""
    history(store, 120, drop_at=100)
    monitor = AnomalyMonitor(store, settle_seconds=0)
    conditions = monitor.tick(T0 + 60 * 120)
    assert monitor.states["a"].level is Level.CRITICAL
    assert {c.labels["severity"] for c in conditions if c.active} == {"ticket"}
    other = AnomalyMonitor(store, settle_seconds=0, page_on=frozenset({"queue_depth"}))
    assert {c.labels["severity"] for c in other.tick(T0 + 60 * 120) if c.active} == {
        "ticket", "page"}  # queue depth is anomalous too, and pages when named


def test_paging_on_an_unknown_metric_is_refused_with_the_known_ones(store: Store) -> None:
    with pytest.raises(ValueError, match="unknown metric.*tokens_per_secnd.*known: .*"
                                         "tokens_per_second"):
        AnomalyMonitor(store, page_on=frozenset({"tokens_per_secnd"}))


def test_throughput_drop_at_the_same_load_is_one_diagnosed_page(store: Store) -> None:
    history(store, 120, drop_at=100)
    monitor = AnomalyMonitor(store, settle_seconds=0, page_on=PAGE_ON_THROUGHPUT)
    conditions = monitor.tick(T0 + 60 * 120)
    state = monitor.states["a"]
    assert state.level is Level.CRITICAL
    assert {THROUGHPUT, "queue_depth"} <= set(state.active)
    active = {c.labels["severity"]: c for c in conditions if c.active}
    assert set(active) == {"ticket", "page"}
    page = active["page"]
    assert page.labels == {"alertname": ANOMALY_ALERT, "target": "a", "severity": "page"}
    assert page.annotations["limit"] == "slow_gpu"
    assert "tokens_per_second" in page.annotations["evidence"]
    assert "ratio 0.4" in page.annotations["evidence"]
    assert page.annotations["baseline"] != "n/a"


def test_a_restart_replays_history_to_the_same_state(store: Store) -> None:
    history(store, 120, drop_at=100)
    live = AnomalyMonitor(store, settle_seconds=0)
    for k in range(60, 121):  # ticking minute by minute
        live.tick(T0 + 60 * k)
    restarted = AnomalyMonitor(store, settle_seconds=0)
    restarted.tick(T0 + 60 * 120)
    a, b = live.states["a"], restarted.states["a"]
    assert (a.level, a.diagnosis, set(a.active)) == (b.level, b.diagnosis, set(b.active))
    assert a.readings[THROUGHPUT].expected == b.readings[THROUGHPUT].expected


def test_clean_history_raises_nothing(store: Store) -> None:
    history(store, 180)
    monitor = AnomalyMonitor(store, settle_seconds=0)
    assert not any(c.active for c in monitor.tick(T0 + 60 * 180))
    assert monitor.states["a"].level is None


def test_anomalies_go_through_the_alerting_loop(store: Store) -> None:
    history(store, 120, drop_at=100)
    book = AlertBook(store)
    loop = AlertingLoop(None, book, None, external_url="http://monitor:8080",
                        anomalies=AnomalyMonitor(store, settle_seconds=0,
                                                 page_on=PAGE_ON_THROUGHPUT))
    sent = loop.evaluate(T0 + 60 * 120)
    assert {a.labels["severity"] for a in sent} == {"ticket", "page"}
    assert all(a.generator_url == "http://monitor:8080/api/v1/targets/a" for a in sent)
    assert all(a.annotations["summary"].startswith("a: ") for a in sent)
    assert {a.state for a in book.alerts()} == {AlertState.FIRING}


def test_run_ticks_the_anomaly_monitor_in_the_background(store: Store) -> None:
    """Under ``run`` (what `inferwatch collect` does), anomalies tick in their own task and
    the evaluation rounds pick up their conditions."""
    now = time.time()
    history(store, 120, drop_at=100, t0=math.floor(now / 60) * 60 - 120 * 60)
    book = AlertBook(store)
    loop = AlertingLoop(None, book, None, interval_seconds=0.1,
                        anomalies=AnomalyMonitor(store, settle_seconds=0,
                                                 page_on=PAGE_ON_THROUGHPUT))

    async def until_firing() -> None:
        stop = asyncio.Event()
        running = asyncio.create_task(loop.run(stop))
        deadline = time.monotonic() + 60
        while len(book.alerts()) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        stop.set()
        await running
    asyncio.run(until_firing())
    assert {(a.labels["severity"], a.state) for a in book.alerts()} == {
        ("ticket", AlertState.FIRING), ("page", AlertState.FIRING)}


def test_a_failing_anomaly_evaluation_freezes_its_alerts(store: Store) -> None:
    history(store, 120, drop_at=100)
    book = AlertBook(store)
    monitor = AnomalyMonitor(store, settle_seconds=0)
    loop = AlertingLoop(None, book, None, anomalies=monitor)
    loop.evaluate(T0 + 60 * 120)

    def broken(now: float) -> list[object]:
        raise RuntimeError("store unreachable")
    monitor.tick = broken  # type: ignore[assignment, method-assign]
    loop.evaluate(T0 + 60 * 121)
    assert {a.state for a in book.alerts()} == {AlertState.FIRING}


def reading(value: float = 1.0) -> Reading:
    return Reading(value, 0.5, 10.0, 0.9, True, False, Level.WARNING)


def test_diagnosis_names_the_likely_limit() -> None:
    assert diagnose({"kv_cache_usage_ratio": reading(), "preemptions_per_second": reading()},
                    {"kv_cache_usage_ratio": 0.97}).limit == "kv_cache_pressure"
    assert diagnose({"queue_depth": reading()}, {"batch_utilization": 1.0}
                    ).limit == "batch_size_cap"
    # The same full batch when it is the token budget's (an engine without a sequence limit)
    assert diagnose({"queue_depth": reading()}, {"batch_utilization": 1.0,
                                                 "token_budget_utilization": 1.0}
                    ).limit == "token_budget"
    assert diagnose({"queue_depth": reading(), "ttft_p99_seconds": reading()},
                    {"batch_utilization": 0.4, "kv_cache_usage_ratio": 0.3}
                    ).limit == "token_budget"
    assert diagnose({"gpu_memory_used_bytes": reading()}, {}).limit == "memory_leak"
    assert diagnose({"itl_p99_seconds": reading(), THROUGHPUT: reading()}, {}
                    ).limit == "slow_gpu"
    assert diagnose({OFFERED_LOAD: reading()}, {}).limit == "under_load"
    assert diagnose({"error_ratio": reading(), "queue_depth": reading()}, {}).limit == "errors"
    assert diagnose({"multivariate": reading()}, {}).limit == "unusual_combination"


def test_the_diagnosis_settles_early_and_is_kept() -> None:
    """A slowed GPU: ITL rises first; many steps later the queue and the KV cache fill (its
    consequences). The alert keeps naming the slow GPU."""
    from monitor.anomaly.target import TargetDetector

    detector = TargetDetector("a", AnomalyParams())
    limits = []
    for k in range(160):
        slow = k >= 100
        consequences = k >= 120
        row = {"tokens_per_second": 1000.0 + 10 * math.sin(k), OFFERED_LOAD: 10.0,
               "itl_p99_seconds": (0.08 if slow else 0.02) * (1 + 0.02 * math.sin(k * 1.3)),
               "queue_depth": 40.0 if consequences else 0.0,
               "kv_cache_usage_ratio": 0.97 if consequences else 0.3 + 0.01 * math.sin(k),
               "preemptions_per_second": 5.0 if consequences else 0.0}
        state = detector.update(60.0 * k, row)
        limits.append(state.diagnosis.limit if state.diagnosis else None)
    assert limits[99] is None
    assert limits[104] == "slow_gpu"
    assert set(limits[125:]) == {"slow_gpu"}
