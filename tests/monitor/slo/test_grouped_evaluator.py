"""The embedded evaluator judges a split SLO (``grouping: [tenant]``) per tenant, as the
generated rules do: a busy tenant burning fast pages with its tenant label, a healthy one at
the same time does not, a quiet one (few events, all bad) stays under the minimum-events gate;
the SLO's own status stays the whole's. Listing 50 tenants costs the store no more queries than
listing 3 (the bulk read takes every group of a counter in one query)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from sqlalchemy import event

from monitor.alerting.book import AlertBook, AlertState
from monitor.alerting.loop import AlertingLoop
from monitor.api.convert import slo_out
from monitor.slo.evaluator import SloEvaluator, SloState
from monitor.slo.groups import group_slo
from monitor.slo.loaders import load_slos
from monitor.slo.source import MinuteArraySource, StoreSliSource
from monitor.slo.spec import Slo
from monitor.slo.steps import StepArrays
from monitor.slo.windows import BURN_ALERT, NO_DATA_ALERT
from monitor.store import Store, by_target
from monitor.store.request_events import write_request_events
from tests.monitor.slo.test_breakdown import NOW, events, gateway_scrape
from tests.monitor.slo.test_rules import ROOT


def per_tenant_slo() -> Slo:
    """The checked-in per-tenant SLO: the gateway's goodput counters, the default gate of 100."""
    (slo,) = load_slos(ROOT / "alerts" / "slos" / "gateway-tenants.yaml")
    assert slo.grouping == ("tenant",) and slo.alerting.min_events == 100
    return slo


def test_a_busy_tenant_pages_alone_and_a_quiet_one_stays_under_the_gate(store: Store) -> None:
    # 5 minutes of scrapes: busy sends 10 per scrape, half good (50x burn); quiet 1 request a
    # minute, every one bad (100x, but 5 events < 100); fine 10 per scrape, all good.
    store.write([gateway_scrape(NOW - 300 + 15 * k, {
        "busy": (10, 5), "quiet": (1, 0) if k % 4 == 0 else (0, 0), "fine": (10, 10)})
        for k in range(1, 21)])
    slo = per_tenant_slo()
    (status,) = SloEvaluator([slo], StoreSliSource(store), settle_seconds=0).tick(NOW)
    # the SLO's own status is the whole's: every tenant's events, 205 bad of 405
    assert status.name == slo.name and status.events == 405 and status.error is None
    assert status.state is SloState.BURNING
    assert [dict(g.group) for g in status.groups] == [
        {"tenant": "busy"}, {"tenant": "fine"}, {"tenant": "quiet"}]
    assert [g.events for g in status.groups] == [200, 200, 5]
    busy, fine, quiet = status.groups
    assert busy.state is SloState.BURNING and fine.state is quiet.state is SloState.OK
    assert busy.budget_remaining == pytest.approx(1 - 50)
    assert quiet.sli == 0  # quiet: every request bad, but not judged (5 events < 100)
    # every burn alert is a tenant's (the whole has none, as in the generated rules); the
    # no-data alert is the SLO's own
    burns = [c for c in status.conditions if c.labels["alertname"] == BURN_ALERT]
    assert {c.labels["tenant"] for c in burns} == {"busy", "fine", "quiet"}
    assert [c.labels for c in status.conditions if c.labels["alertname"] == NO_DATA_ALERT
            ] == [{"alertname": NO_DATA_ALERT, "service": "inference", "severity": "ticket",
                   "slo": slo.name, "window": "15m"}]
    firing = sorted((c.labels["tenant"], c.labels["severity"], c.labels["window"])
                    for c in status.conditions if c.active)
    assert firing == [("busy", "page", "1h/5m"), ("busy", "page", "6h/30m"),  # 50x, every
                      ("busy", "ticket", "1d/2h"), ("busy", "ticket", "3d/6h")]  # window
    page = next(c for c in burns if c.active)
    assert page.labels == {"alertname": BURN_ALERT, "service": "inference",
                           "severity": "page", "slo": slo.name, "tenant": "busy",
                           "window": "1h/5m"}
    assert page.annotations["summary"].startswith(f"SLO {slo.name} for tenant=busy (")
    # the API lists the groups under the SLO, and its whole beside them
    body = slo_out(slo, status, []).model_dump()
    assert body["events"] == 405 and body["state"] == "burning"
    assert [(g["labels"], g["state"], g["events"]) for g in body["groups"]] == [
        ({"tenant": "busy"}, "burning", 200), ({"tenant": "fine"}, "ok", 200),
        ({"tenant": "quiet"}, "ok", 5)]


@contextmanager
def counting(store: Store, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The statements run on ``store``: through SQLAlchemy, and the counter reads that go to
    SQLite's cursor directly (``by_target._batches``)."""
    statements: list[str] = []
    batches = by_target._batches

    def count(*args: Any) -> None:
        if args[2].strip().upper() != "BEGIN":  # SQLite's own; psycopg's are not seen
            statements.append(args[2])

    def counted(conn: Any, stmt: Any) -> Any:
        statements.append(str(stmt))
        return batches(conn, stmt)

    event.listen(store.engine, "before_cursor_execute", count)
    monkeypatch.setattr(by_target, "_batches", counted)
    try:
        yield statements
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
        monkeypatch.setattr(by_target, "_batches", batches)


def test_fifty_tenants_cost_the_store_the_queries_of_three(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first tick (history) and a later one (catch-up and the open minute): the same number
    of statements for 3 tenants as for 53, and on the first tick one more than the SLO unsplit
    (its groups listed, at most once a minute)."""
    def queries(tenants: int, split: bool = True) -> tuple[int, int]:
        case = f"case{len(done)}-"
        names = [f"{case}{k:02d}" for k in range(tenants)]
        now = NOW + 3600 * len(done)  # each case its own hour of scrapes and its own tenants
        done.append(tenants)
        store.write([gateway_scrape(now - 300 + 60 * k, {n: (10, 9) for n in names})
                     for k in range(1, 5)])
        slo = per_tenant_slo()
        if not split:
            slo = slo.model_copy(update={"grouping": ()})
        slo = slo.model_copy(update={"name": f"{slo.name}-{tenants}-{split}"})
        evaluator = SloEvaluator([slo], StoreSliSource(store), settle_seconds=0)
        with counting(store, monkeypatch) as first:
            (status,) = evaluator.tick(now - 30)
        with counting(store, monkeypatch) as later:
            (status,) = evaluator.tick(now)
        assert status.error is None and len(status.groups) == (sum(done) if split else 0)
        assert [g.events for g in status.groups if dict(g.group)["tenant"].startswith(case)
                ] == ([40] * tenants if split else [])  # 4 scrapes of 10 requests
        return len(first), len(later)

    done: list[int] = []
    three, fifty, whole = queries(3), queries(50), queries(50, split=False)
    assert three == fifty, (three, fifty)
    assert fifty[0] == whole[0] + 1 and fifty[1] == whole[1], (fifty, whole)


class Flaky(MinuteArraySource):
    """Per-minute series whose reads of the SLOs named in ``broken`` fail."""

    broken: frozenset[str] = frozenset()

    def read_arrays(self, slo: Slo, start: float, end: float, step: float) -> StepArrays:
        if slo.name in self.broken:
            raise OSError(f"{slo.name}: the store went away")
        return super().read_arrays(slo, start, end, step)


def test_the_alert_loop_pages_the_busy_tenant_and_freezes_a_tenant_it_cannot_read() -> None:
    """Through the alerting loop: the busy tenant's pages are firing with its label, the
    others have none; when its group cannot be read, its alerts stay as they were (not
    resolved), as an unreadable SLO's do."""
    slo = per_tenant_slo()
    minutes = 2 * 1440
    has = np.ones(minutes, dtype=bool)
    busy = np.full(minutes, 20.0)
    busy_good = busy.copy()
    busy_good[-10:] = 0.0  # the last 10 minutes all bad
    fine = np.full(minutes, 20.0)
    series: dict[str, tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike]] = {
        f"{slo.name}/tenant=busy": (busy_good, busy, has),
        f"{slo.name}/tenant=fine": (fine, fine, has),
        slo.name: (busy_good + fine, busy + fine, has)}
    source = Flaky(0, series)
    loop = AlertingLoop(SloEvaluator([slo], source, settle_seconds=0), AlertBook(), None)
    now = minutes * 60.0
    loop.evaluate(now)

    def firing() -> list[tuple[str, str, str]]:
        return sorted((a.labels["tenant"], a.labels["severity"], a.labels["window"])
                      for a in loop.book.alerts() if a.state is AlertState.FIRING)

    assert firing() == [("busy", "page", "1h/5m")]  # 10 of 60 minutes bad: 16.7x
    source.broken = frozenset({f"{slo.name}/tenant=busy"})
    loop.evaluate(now + 60)
    (status,) = loop.statuses
    assert [g.state for g in status.groups] == [SloState.ERROR, SloState.OK]
    assert firing() == [("busy", "page", "1h/5m")]  # 10 of 60 minutes bad: 16.7x
    source.broken = frozenset()
    series[f"{slo.name}/tenant=busy"] = (busy, busy, has)  # all good again: resolves
    loop = AlertingLoop(SloEvaluator([slo], MinuteArraySource(0, series), settle_seconds=0),
                        loop.book, None)
    loop.evaluate(now + 120)
    assert firing() == []


def test_many_counters_read_per_series_equal_their_columns(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bulk read of a split SLO's groups (14 counters over 12 series: read per series)
    gives every group and the whole the steps of the one-query-with-two-columns-per-counter
    read, over raw scrapes and minute steps."""
    tenants = [f"t{k}" for k in range(6)]
    store.write([gateway_scrape(NOW - 600 + 15 * k, {
        t: (k % (j + 2), k % (j + 2) - (k % 3 == 0 and j % 2)) for j, t in enumerate(tenants)})
        for k in range(1, 41)])
    slo = per_tenant_slo()
    slos = [slo, *(group_slo(slo, (("tenant", t),)) for t in tenants)]
    source = StoreSliSource(store)
    per_series = source.read_many(slos, NOW - 600, NOW, 60)
    monkeypatch.setattr(by_target, "_KEY_COLUMNS", 1000)
    columns = source.read_many(slos, NOW - 600, NOW, 60)
    assert sorted(per_series) == sorted(columns) == sorted(s.name for s in slos)
    for name, steps in per_series.items():
        other = columns[name]
        assert isinstance(steps, StepArrays) and isinstance(other, StepArrays)
        assert steps.total.sum() > 0
        np.testing.assert_array_equal(steps.end, other.end)
        np.testing.assert_allclose(steps.good, other.good)
        np.testing.assert_allclose(steps.total, other.total)
        np.testing.assert_array_equal(steps.has_data, other.has_data)


def test_a_goodput_slo_split_by_tenant_pages_from_the_request_events(store: Store) -> None:
    """A goodput SLI (the stored request events) split the same way: its groups are the
    tenants of the period's events."""
    write_request_events(store.engine, events("busy", 200, 100) + events("quiet", 5, 5)
                         + events("fine", 100, 0))
    slo = Slo.model_validate({"name": "chat-goodput", "objective": 0.99, "window": "30d",
                              "sli": {"kind": "goodput"}, "grouping": ["tenant"]})
    (status,) = SloEvaluator([slo], StoreSliSource(store), settle_seconds=0).tick(NOW)
    assert status.events == 305
    assert [(dict(g.group)["tenant"], g.events) for g in status.groups] == [
        ("busy", 200), ("fine", 100), ("quiet", 5)]
    firing = sorted((c.labels["tenant"], c.labels["window"]) for c in status.conditions
                    if c.active and c.labels["severity"] == "page")
    assert firing == [("busy", "1h/5m"), ("busy", "6h/30m")]  # quiet: 5 < 100 events
