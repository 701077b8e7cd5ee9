"""Goodput SLIs over the gateway's stored request events: the spec takes targets at any value,
the evaluator reads exact good/total per step from the store (SQLite and PostgreSQL), and the
rule generators leave these SLOs out (Prometheus has no events)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from monitor.slo.evaluator import SloEvaluator
from monitor.slo.report import build_report
from monitor.slo.rules import describe_sli, generate_rules, sli_queries
from monitor.slo.source import StoreSliSource
from monitor.slo.spec import GoodputSli, Slo, prometheus_slos
from monitor.store import Store
from monitor.store.request_events import RequestEventRow, write_request_events

T0 = 1_800_000_000.0


def make(name: str = "chat-goodput", **sli: object) -> Slo:
    return Slo.model_validate({"name": name, "objective": 0.9, "window": "1d",
                               "sli": {"kind": "goodput", **sli}})


def event(at: float, ttft: float, good: bool, tenant: str = "a",
          outcome: str = "ok") -> RequestEventRow:
    return RequestEventRow(at=at, model="tiny", tenant=tenant, slo_class="interactive",
                           outcome=outcome, status=200, good=good, ttft_seconds=ttft,
                           tpot_seconds=0.03, e2e_seconds=ttft + 0.5)


def test_targets_take_any_value_as_durations() -> None:
    sli = make(ttft_seconds="370ms", tpot_seconds=0.06).sli
    assert isinstance(sli, GoodputSli)
    assert (sli.ttft_seconds, sli.tpot_seconds, sli.judged_at_the_gateway) == (0.37, 0.06, False)
    assert make().sli.judged_at_the_gateway  # type: ignore[union-attr]
    with pytest.raises(ValidationError):
        make(ttft_seconds=-1)


def test_the_store_source_counts_each_steps_requests_exactly(store: Store) -> None:
    # minute 1: TTFT 0.1, 0.3 (good at the edge), 0.5 (bad), a failed one; minute 2: 0.36
    write_request_events(store.engine, [
        event(T0 + 10, 0.1, True), event(T0 + 20, 0.3, True), event(T0 + 30, 0.5, False),
        event(T0 + 40, 0.05, False, outcome="error"), event(T0 + 70, 0.36, True, tenant="b")])
    source = StoreSliSource(store)
    by_verdict = source.read(make(), T0, T0 + 180, 60)
    assert [(s.end, s.good, s.total, s.has_data) for s in by_verdict] == [
        (T0 + 60, 2.0, 4.0, True), (T0 + 120, 1.0, 1.0, True), (T0 + 180, 0.0, 0.0, True)]
    # 350 ms sits between the gateway's bucket edges 0.315 and 0.355: counted exactly
    off_edge = source.read(make(ttft_seconds=0.35), T0, T0 + 120, 60)
    assert [(s.good, s.total) for s in off_edge] == [(2.0, 4.0), (0.0, 1.0)]
    tenant_b = source.read(make(tenant="b"), T0, T0 + 120, 60)
    assert [(s.good, s.total) for s in tenant_b] == [(0.0, 0.0), (1.0, 1.0)]
    bulk = source.read_many([make(ttft_seconds=0.35)], T0, T0 + 120, 60)["chat-goodput"]
    assert not isinstance(bulk, Exception)
    assert list(bulk.good) == [2.0, 0.0] and list(bulk.total) == [4.0, 1.0]


def test_the_evaluator_reports_the_exact_ratio(store: Store) -> None:
    write_request_events(store.engine, [event(T0 + 60 * k + 1, 0.1 + 0.1 * (k % 5), True)
                                        for k in range(50)])
    evaluator = SloEvaluator([make(ttft_seconds=0.25)], StoreSliSource(store),
                             settle_seconds=0)
    status = evaluator.tick(T0 + 3600)[0]
    # TTFT cycles 0.1 .. 0.5: 0.1 and 0.2 meet 250 ms, 2 of every 5
    assert status.events == 50 and math.isclose(status.sli, 0.4)
    assert status.error is None


def test_rules_leave_event_slos_out_and_say_why() -> None:
    events_slo = make(ttft_seconds=0.8)
    metrics_slo = Slo.model_validate({"name": "ttft", "objective": 0.99, "sli": {
        "kind": "latency", "metric": "ttft", "threshold_seconds": 0.25}})
    assert prometheus_slos([events_slo, metrics_slo]) == [metrics_slo]
    rules = generate_rules([events_slo, metrics_slo])
    assert 'slo="ttft"' in rules and "chat-goodput" not in rules
    with pytest.raises(ValueError, match="read from stored request events"):
        sli_queries(events_slo)
    assert describe_sli(events_slo) == "requests (stored events) succeeding with TTFT <= 800ms"


def test_the_report_over_a_day_of_events(store: Store) -> None:
    # one request a minute for 300 minutes, every third bad by the gateway's verdict
    write_request_events(store.engine, [event(T0 + 60 * k + 1, 0.1, k % 3 > 0)
                                        for k in range(300)])
    report = build_report(make(), StoreSliSource(store), T0, T0 + 86400, 3600,
                          now=T0 + 86400)
    assert (report.totals.events, report.totals.good) == (300.0, 200.0)
    assert report.slo.sli == "requests (stored events) good by the gateway's verdict"
