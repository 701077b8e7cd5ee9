"""AlertBook: the alert lifecycle, what is sent when, and state that survives a restart."""

from __future__ import annotations

from monitor.alerting.book import AlertBook, AlertState
from monitor.slo.evaluator import AlertCondition
from monitor.store import Store

LABELS = {"alertname": "InferwatchSLOBurnRate", "slo": "chat", "severity": "page",
          "window": "1h/5m"}


def cond(active: bool, for_seconds: float = 0.0, value: float = 20.0,
         labels: dict[str, str] | None = None) -> AlertCondition:
    return AlertCondition(labels or LABELS, {"summary": f"burn {value}"}, active, for_seconds,
                          value)


def test_pending_waits_for_its_duration_and_is_never_sent() -> None:
    book = AlertBook(resend_seconds=60)
    (alert,) = book.update(0, [cond(True, for_seconds=120)])
    assert alert.state is AlertState.PENDING and book.due(0) == []
    assert book.update(60, [cond(True, for_seconds=120)]) == []
    (alert,) = book.update(120, [cond(True, for_seconds=120)])
    assert alert.state is AlertState.FIRING and alert.fired_at == 120
    (sent,) = book.due(120)
    assert (sent.starts_at, sent.resolved) == (120, False)


def test_a_pending_alert_that_stops_holding_vanishes_unsent() -> None:
    book = AlertBook()
    book.update(0, [cond(True, for_seconds=300)])
    assert book.update(60, [cond(False, for_seconds=300)]) == []
    assert book.alerts() == [] and book.due(60) == []


def test_firing_is_resent_on_schedule_and_resolved_with_its_end_time() -> None:
    book = AlertBook(resend_seconds=60, hold_seconds=240, resolved_retention_seconds=900)
    book.update(0, [cond(True)])
    (first,) = book.due(0)
    assert first.ends_at == 240  # Alertmanager resolves it alone if the monitor dies
    book.update(30, [cond(True, value=25.0)])
    assert book.due(30) == []
    (again,) = book.due(61)
    assert again.starts_at == 0 and again.annotations["summary"] == "burn 25.0"
    (resolved,) = book.update(90, [cond(False)])
    assert resolved.state is AlertState.RESOLVED
    (sent,) = book.due(90)  # at once, not at the next resend
    assert sent.resolved and sent.ends_at == 90
    assert book.due(100) == []
    assert [s.ends_at for s in book.due(151)] == [90]  # announced again while retained
    book.update(1000, [])
    assert book.alerts() == []


def test_an_alert_that_disappears_from_the_conditions_resolves_unless_frozen() -> None:
    book = AlertBook()
    book.update(0, [cond(True)])
    assert book.update(15, [], frozen=lambda labels: labels.get("slo") == "chat") == []
    assert book.alerts()[0].state is AlertState.FIRING
    (alert,) = book.update(30, [])
    assert alert.state is AlertState.RESOLVED


def test_a_restart_keeps_firing_alerts_and_does_not_announce_them_anew(store: Store) -> None:
    book = AlertBook(store, resend_seconds=60)
    book.update(0, [cond(True), cond(True, labels={**LABELS, "slo": "other"})])
    assert len(book.due(0)) == 2
    book.update(30, [cond(True), cond(False, labels={**LABELS, "slo": "other"})])

    restarted = AlertBook(store, resend_seconds=60)
    states = {a.labels["slo"]: (a.state, a.fired_at) for a in restarted.alerts()}
    assert states == {"chat": (AlertState.FIRING, 0), "other": (AlertState.RESOLVED, 0)}
    assert restarted.update(45, [cond(True), cond(False, labels={**LABELS, "slo": "other"})]
                            ) == []
    # The resolve was not yet sent before the restart: it goes out; the firing one waits for
    # its resend time and keeps its startsAt.
    assert [(s.labels["slo"], s.resolved) for s in restarted.due(45)] == [("other", True)]
    (resent,) = restarted.due(61)
    assert (resent.labels["slo"], resent.starts_at) == ("chat", 0)


def test_a_book_that_may_no_longer_save_writes_nothing(store: Store) -> None:
    """A replica that stepped down while a round was running: the round's changes are not
    saved over what the new active decides."""
    book = AlertBook(store, resend_seconds=60)
    book.may_save = lambda: False
    book.update(0, [cond(True)])
    assert [a.state for a in book.alerts()] == [AlertState.FIRING]  # in memory only
    assert AlertBook(store).alerts() == []
