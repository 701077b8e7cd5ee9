"""Request events in the store (both databases): written, read by window and label, pruned
with the minute rollups, and summarized into exact percentiles and goodput."""

from __future__ import annotations

import pytest

from monitor.store import RetentionPolicy, Store
from monitor.store.request_events import (
    RequestEventRow,
    RequestFilter,
    read_request_events,
    write_request_events,
)
from monitor.store.request_sli import GoodputCriteria, summarize_by, summarize_requests
from tests.monitor.store.builders import T0

DAY = 86_400.0


def event(at: float, ttft: float, tenant: str = "key-a", outcome: str = "ok",
          good: bool = True, slo_class: str = "interactive",
          tpot: float | None = 0.02) -> RequestEventRow:
    return RequestEventRow(at=at, model="tiny", tenant=tenant, slo_class=slo_class,
                           outcome=outcome, status=200 if outcome == "ok" else 502, good=good,
                           ttft_seconds=ttft, tpot_seconds=tpot, e2e_seconds=ttft + 1.0,
                           prompt_tokens=7, output_tokens=5, target_ttft_seconds=0.5,
                           engine_queue_seconds=0.001)


def test_events_read_back_exactly_as_written_and_filtered(store: Store) -> None:
    rows = [event(T0 + 1, 0.1), event(T0 + 2, 0.2, tenant="key-b"),
            event(T0 + 3, 0.3, outcome="error", good=False)]
    write_request_events(store.engine, rows)
    assert read_request_events(store.engine, RequestFilter()) == rows
    assert read_request_events(store.engine, RequestFilter(tenant="key-b")) == [rows[1]]
    # [start, end): the event at T0 + 3 is outside
    assert read_request_events(store.engine, RequestFilter(start=T0 + 2, end=T0 + 3)) == [rows[1]]


def test_events_are_kept_as_long_as_the_minute_rollups(store: Store) -> None:
    write_request_events(store.engine, [event(T0 + day * DAY, 0.1) for day in range(5)])
    policy = RetentionPolicy(raw_seconds=DAY, minute_seconds=2.5 * DAY, hour_seconds=3 * DAY)
    store.apply_retention(T0 + 4 * DAY, policy)
    kept = read_request_events(store.engine, RequestFilter())
    assert [row.at for row in kept] == [T0 + 2 * DAY, T0 + 3 * DAY, T0 + 4 * DAY]


def test_percentiles_are_exact_over_the_successful_requests() -> None:
    # TTFT 0.1 .. 1.0 s on ten good requests; a failed one at 9 s must not count.
    rows = [event(T0 + i, (i + 1) / 10) for i in range(10)]
    rows.append(event(T0 + 10, 9.0, outcome="error", good=False))
    summary = summarize_requests(rows)
    # linear interpolation: p50 at rank 4.5 between 0.5 and 0.6; p90 at 8.1; p99 at 8.91
    assert summary.latency["ttft"]["p50"] == pytest.approx(0.55)
    assert summary.latency["ttft"]["p90"] == pytest.approx(0.91)
    assert summary.latency["ttft"]["p99"] == pytest.approx(0.991)
    assert summary.latency["e2e"]["p50"] == pytest.approx(1.55)
    assert summary.num_requests == 11 and summary.num_good == 10
    assert summary.outcomes == {"ok": 10, "error": 1}


@pytest.mark.parametrize(("criteria", "good"), [
    (GoodputCriteria(ttft_seconds=0.35), 3),  # 0.1, 0.2, 0.3 (the error never counts)
    (GoodputCriteria(ttft_seconds=0.35, tpot_seconds=0.01), 1),  # only the one without TPOT
    (GoodputCriteria(e2e_seconds=1.2), 2),
], ids=["ttft-between-any-buckets", "and-tpot", "e2e"])
def test_goodput_against_any_thresholds(criteria: GoodputCriteria, good: int) -> None:
    rows = [event(T0, 0.1, tpot=None), event(T0, 0.2), event(T0, 0.3), event(T0, 0.4),
            event(T0, 0.05, outcome="timeout", good=False)]
    summary = summarize_requests(rows, criteria)
    assert summary.num_good == good
    assert summary.goodput_ratio == good / 5


def test_summaries_per_tenant_add_up_to_the_whole() -> None:
    rows = [event(T0, 0.1, tenant="key-a"), event(T0, 0.2, tenant="key-b", good=False),
            event(T0, 0.3, tenant="key-a")]
    by_tenant = summarize_by(rows, "tenant")
    assert {name: (s.num_requests, s.num_good) for name, s in by_tenant.items()} == {
        "key-a": (2, 2), "key-b": (1, 0)}
    with pytest.raises(ValueError, match="group by one of"):
        summarize_by(rows, "status")
