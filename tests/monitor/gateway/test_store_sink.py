"""The gateway's store sink: every judged request becomes a row (both databases), written off
the request path; a full queue drops and counts, never blocks."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import httpx
import pytest
from prometheus_client import CollectorRegistry

from monitor.gateway import (
    Gateway,
    GatewayConfig,
    RequestEvent,
    RequestTiming,
    SloClass,
)
from monitor.gateway.store_sink import StoreSink
from monitor.store import Store
from monitor.store.request_events import (
    RequestEventRow,
    RequestFilter,
    read_request_events,
    write_request_events,
)
from tests.asgi_thread import serving
from tests.monitor.gateway.conftest import SALT
from tests.monitor.gateway.test_proxy import CHAT, chat_body
from tests.monitor.gateway.upstream import Upstream


def _stored(store: Store, count: int, timeout: float = 10.0) -> list[RequestEventRow]:
    deadline = time.monotonic() + timeout
    while len(rows := read_request_events(store.engine, RequestFilter())) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(rows)} of {count} events stored")
        time.sleep(0.05)
    return rows


def test_each_request_through_the_gateway_is_stored_with_its_verdict(store: Store) -> None:
    upstream = Upstream()
    upstream.script.num_chunks, upstream.script.interval = 4, 0.02
    upstream.script.metrics = {"queue_time_ms": 3.0, "time_to_first_token_ms": 9.0}
    registry = CollectorRegistry()
    sink = StoreSink(lambda rows: write_request_events(store.engine, rows), registry,
                     flush_seconds=0.05)
    sink.start()
    before = time.time()
    with serving(upstream.app()) as upstream_url:
        gateway = Gateway(GatewayConfig(upstream_url, SALT), registry, sinks=[sink])
        with serving(gateway) as url:
            httpx.post(url + CHAT, json=chat_body(), timeout=10,
                       headers={"authorization": "Bearer sk-secret", "x-slo-ttft-ms": "5000"})
            httpx.post(url + CHAT, json=chat_body(), timeout=10,
                       headers={"x-slo-itl-ms": "1"})  # 20 ms gaps: misses its ITL target
            rows = _stored(store, 2)
    sink.close()
    first, second = sorted(rows, key=lambda row: row.target_ttft_seconds or 0, reverse=True)
    assert first.tenant.startswith("key-") and "sk-secret" not in first.tenant
    assert (first.outcome, first.status, first.good, first.slo_class) == ("ok", 200, True,
                                                                          "custom")
    assert first.output_tokens == 4 and first.prompt_tokens == 7
    assert first.target_ttft_seconds == 5.0
    assert first.engine_queue_seconds == 0.003 and first.engine_ttft_seconds == 0.009
    assert first.ttft_seconds is not None and first.e2e_seconds is not None
    assert 0 < first.ttft_seconds < first.e2e_seconds
    assert first.tpot_seconds is not None and first.max_itl_seconds is not None
    # TPOT spreads E2E after the first token over the later tokens (the stream's tail after
    # the last token included, so it can exceed the largest gap on a busy machine).
    assert first.tpot_seconds == pytest.approx(
        (first.e2e_seconds - first.ttft_seconds) / (first.output_tokens - 1))
    assert first.tpot_seconds > 0.015 and first.max_itl_seconds > 0.015
    assert before <= first.at <= time.time()
    assert (second.tenant, second.good, second.target_itl_seconds) == ("anonymous", False,
                                                                       0.001)
    assert registry.get_sample_value("inferwatch_gateway_events_stored_total") == 2


def test_a_full_queue_drops_and_counts_without_waiting_for_the_store() -> None:
    release = threading.Event()
    written: list[int] = []

    def slow_write(rows: Sequence[RequestEventRow]) -> None:
        release.wait(10)
        written.append(len(rows))

    registry = CollectorRegistry()
    sink = StoreSink(slow_write, registry, max_queue=2, max_batch=1, flush_seconds=0.01)
    sink.start()
    event = _finished_event()
    sink(event)  # taken by the writer, which then waits on the store
    deadline = time.monotonic() + 5
    while sink._queue.qsize() and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.perf_counter()
    for _ in range(5):  # two fit in the queue, three are dropped
        sink(event)
    assert time.perf_counter() - started < 0.05
    assert registry.get_sample_value("inferwatch_gateway_events_dropped_total") == 3
    release.set()
    sink.close()
    assert written == [1, 1, 1]
    assert registry.get_sample_value("inferwatch_gateway_events_stored_total") == 3


def test_a_failing_store_loses_the_batch_counted_and_the_writer_goes_on() -> None:
    calls: list[int] = []

    def flaky(rows: Sequence[RequestEventRow]) -> None:
        calls.append(len(rows))
        if len(calls) == 1:
            raise OSError("store down")

    registry = CollectorRegistry()
    sink = StoreSink(flaky, registry, max_batch=1, flush_seconds=0.01)
    sink.start()
    sink(_finished_event())
    sink(_finished_event())
    sink.close()
    assert calls == [1, 1]
    assert registry.get_sample_value("inferwatch_gateway_events_write_failed_total") == 1
    assert registry.get_sample_value("inferwatch_gateway_events_stored_total") == 1


def _finished_event() -> RequestEvent:
    now = time.perf_counter()
    return RequestEvent("/v1/chat/completions", "tiny", "key-a", SloClass("default", 1.0),
                        True, RequestTiming(arrived_at=now - 0.5, first_token_at=now - 0.4,
                                            finished_at=now), status=200, good=True)
