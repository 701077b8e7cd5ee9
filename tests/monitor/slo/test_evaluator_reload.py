"""A reload of the SLO specs: unchanged SLOs keep their state, edited and new ones start
afresh, removed ones go; the alert book carries every alert over (none re-sent, none lost)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from monitor.alerting.book import AlertBook, AlertState
from monitor.slo.evaluator import SloEvaluator, SloStatus
from monitor.slo.source import MinuteArraySource, Step
from monitor.slo.spec import Slo
from monitor.slo.windows import BURN_ALERT

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
DAY = 1440
NOW = T0 + 2 * DAY * 60


def slo(name: str, objective: float = 0.99) -> Slo:
    return Slo.model_validate({"name": name, "objective": objective, "window": "30d",
                               "sli": {"kind": "availability"}})


class CountingSource(MinuteArraySource):
    """Two days of 100 requests a minute per SLO; ``burning`` has 50% errors throughout.
    Records each read's step, so a test sees which SLO loaded history (hour steps)."""

    def __init__(self, names: list[str]) -> None:
        n = 2 * DAY + 60
        total = np.full(n, 100.0)
        series: dict[str, tuple[npt.ArrayLike, npt.ArrayLike, npt.ArrayLike]] = {
            name: (total * (0.5 if name == "burning" else 1.0), total, np.ones(n, dtype=bool))
            for name in names}
        super().__init__(T0, series)
        self.reads: list[tuple[str, float]] = []

    def read(self, slo: Slo, start: float, end: float, step: float) -> list[Step]:
        self.reads.append((slo.name, step))
        return super().read(slo, start, end, step)

    def history_loads(self) -> list[str]:
        return [name for name, step in self.reads if step == 3600]


def by_name(statuses: list[SloStatus]) -> dict[str, SloStatus]:
    return {s.name: s for s in statuses}


def firing_pages(status: SloStatus) -> list[str]:
    return [c.labels["window"] for c in status.conditions
            if c.active and c.labels["alertname"] == BURN_ALERT]


@pytest.fixture
def source() -> CountingSource:
    return CountingSource(["burning", "calm", "new"])


def test_an_unchanged_spec_keeps_its_state_and_an_edited_one_starts_afresh(
        source: CountingSource) -> None:
    evaluator = SloEvaluator([slo("burning"), slo("calm")], source, settle_seconds=0)
    before = by_name(evaluator.tick(NOW))
    assert sorted(source.history_loads()) == ["burning", "calm"]
    source.reads.clear()

    # Specs parsed again from the files: equal values, new objects.
    changes = evaluator.replace_slos([slo("burning"), slo("calm", objective=0.9)])
    assert (changes.added, changes.changed, changes.removed, changes.kept) == (
        (), ("calm",), (), ("burning",))
    after = by_name(evaluator.tick(NOW + 60))
    assert source.history_loads() == ["calm"]  # only the edited SLO read its history again
    assert after["calm"].objective == 0.9
    kept = after["burning"]
    assert kept.budget_remaining == pytest.approx(before["burning"].budget_remaining,
                                                  abs=1e-3)
    assert firing_pages(kept) == firing_pages(before["burning"]) != []


def test_added_slos_are_evaluated_and_removed_ones_are_not(source: CountingSource) -> None:
    evaluator = SloEvaluator([slo("burning"), slo("calm")], source, settle_seconds=0)
    evaluator.tick(NOW)
    changes = evaluator.replace_slos([slo("calm"), slo("new")])
    assert (changes.added, changes.removed, changes.kept) == (("new",), ("burning",), ("calm",))
    assert [s.name for s in evaluator.tick(NOW + 60)] == ["calm", "new"]
    assert [s.name for s in evaluator.slos] == ["calm", "new"]


@pytest.mark.parametrize(("slos", "message"), [
    ([slo("calm"), slo("calm", 0.9)], "SLO names used twice: ['calm']"),
], ids=["a name used twice"])
def test_an_unusable_set_changes_nothing(source: CountingSource, slos: list[Slo],
                                         message: str) -> None:
    evaluator = SloEvaluator([slo("burning"), slo("calm")], source, settle_seconds=0)
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        evaluator.plan_slos(slos)
    assert [s.name for s in evaluator.slos] == ["burning", "calm"]


def test_a_plan_made_against_other_slos_is_refused(source: CountingSource) -> None:
    evaluator = SloEvaluator([slo("burning")], source, settle_seconds=0)
    stale = evaluator.plan_slos([slo("calm")])
    evaluator.replace_slos([slo("new")])
    with pytest.raises(RuntimeError, match="another set of SLOs"):
        evaluator.apply_slos(stale)
    assert [s.name for s in evaluator.slos] == ["new"]


def round_of(evaluator: SloEvaluator, book: AlertBook, now: float) -> list[dict[str, Any]]:
    """One alerting round: what would be sent to Alertmanager."""
    book.update(now, [c for s in evaluator.tick(now) for c in s.conditions])
    return [{"slo": o.labels["slo"], "window": o.labels["window"], "resolved": o.resolved,
             "starts_at": o.starts_at} for o in book.due(now)]


def test_alerts_carry_over_a_reload_neither_resent_nor_lost(source: CountingSource) -> None:
    evaluator = SloEvaluator([slo("burning"), slo("calm")], source, settle_seconds=0)
    book = AlertBook(resend_seconds=3600)
    first = round_of(evaluator, book, NOW)
    assert first and {a["slo"] for a in first} == {"burning"}
    assert not any(a["resolved"] for a in first)

    evaluator.replace_slos([slo("burning"), slo("calm", 0.9)])  # edit the other SLO
    assert round_of(evaluator, book, NOW + 60) == []  # nothing re-sent as new
    firing = [a for a in book.alerts() if a.state is AlertState.FIRING]
    assert {a.labels["window"] for a in firing} == {a["window"] for a in first}
    assert {a.fired_at for a in firing} == {NOW}  # the same startsAt: the same alerts

    evaluator.replace_slos([slo("calm", 0.9)])  # the burning SLO's spec is gone
    resolves = round_of(evaluator, book, NOW + 120)
    # Its alerts resolve (as Prometheus resolves a removed rule's), none is dropped unsent.
    assert sorted(a["window"] for a in resolves) == sorted(a["window"] for a in first)
    assert all(a["resolved"] and a["starts_at"] == NOW for a in resolves)


class BlockingSource(CountingSource):
    """Holds a read of SLO ``calm`` until ``release`` is set: a tick caught mid-way."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(names)
        self.reading = threading.Event()
        self.release = threading.Event()

    def read(self, slo: Slo, start: float, end: float, step: float) -> list[Step]:
        if slo.name == "calm" and not self.release.is_set():
            self.reading.set()
            assert self.release.wait(10)
        return super().read(slo, start, end, step)


def test_a_tick_in_flight_finishes_on_the_old_slos_and_the_next_reads_the_new() -> None:
    source = BlockingSource(["burning", "calm", "new"])
    evaluator = SloEvaluator([slo("burning"), slo("calm")], source, settle_seconds=0)
    with ThreadPoolExecutor(1) as pool:
        in_flight = pool.submit(evaluator.tick, NOW)
        assert source.reading.wait(10)
        changes = evaluator.replace_slos([slo("burning"), slo("new")])  # the loop's reload
        source.release.set()
        assert [s.name for s in in_flight.result(10)] == ["burning", "calm"]
    assert changes.removed == ("calm",) and changes.kept == ("burning",)
    assert [s.name for s in evaluator.tick(NOW + 60)] == ["burning", "new"]
