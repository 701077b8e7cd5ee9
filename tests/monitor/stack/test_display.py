"""The terminal display, from hand-made monitor API answers (the contract's JSON)."""

import io
import math

import pytest

from monitor.stack.display import (
    AlertChange,
    Budget,
    Console,
    Reading,
    alert_changes,
    budgets,
    clock,
    format_alert,
    format_status,
    latest_value,
)

SLOS = {"items": [
    {"name": "demo-availability", "service": "demo", "objective": 0.99, "period": "7d",
     "state": "burning", "sli": 0.9, "events": 1200.0, "budget_remaining": -9.0,
     "time_to_exhaustion_seconds": 0.0, "burn_rates": [], "alerts": [], "evaluated_at": 1.0,
     "error": None},
    {"name": "demo-ttft", "service": "demo", "objective": 0.99, "period": "7d",
     "state": "no_data", "sli": None, "events": 0.0, "budget_remaining": None,
     "time_to_exhaustion_seconds": None, "burn_rates": [], "alerts": [], "evaluated_at": None,
     "error": None},
], "total": 2, "limit": 1000, "offset": 0}


def _alert(state, fingerprint="a1", fired_at=100.0):
    return {"fingerprint": fingerprint, "alertname": "InferwatchSLOBurnRate",
            "labels": {"alertname": "InferwatchSLOBurnRate", "slo": "demo-availability",
                       "service": "demo", "severity": "page", "window": "1h/2m"},
            "annotations": {"summary": "SLO demo-availability is burning 15x too fast"},
            "state": state, "active_at": 99.0, "fired_at": fired_at,
            "resolved_at": 300.0 if state == "resolved" else None, "value": 15.0}


def test_the_latest_value_is_the_last_point_with_one():
    series = {"target": "reference-0", "metric": "tokens_per_second", "unit": "1/s",
              "step": 15, "points": [[1.0, 200.5], [16.0, 212.0], [31.0, None]]}
    assert latest_value(series) == 212.0
    assert latest_value({**series, "points": []}) is None
    assert latest_value({**series, "points": [[1.0, None]]}) is None


def test_a_status_line_shows_throughput_batch_latency_budgets_and_alerts():
    reading = Reading(212.4, 0.314, 0.0481, budgets(SLOS["items"]), num_firing=1)
    line = format_status(205.0, 4.83, reading)
    assert line == ("[03:25] load 4.8 req/s | 212 tok/s | batch 31% | p99 TTFT 48 ms | "
                    "budget left: demo-availability -900%, demo-ttft - | 1 alert firing")


def test_a_status_line_before_any_data_shows_dashes():
    line = format_status(0.0, 1.0, Reading())
    assert line == ("[00:00] load 1.0 req/s | - tok/s | batch -% | p99 TTFT - ms | "
                    "budget left: - | no alert firing")


def test_budgets_keep_the_slo_order_and_state():
    assert budgets(SLOS["items"]) == (Budget("demo-availability", -9.0, "burning"),
                                      Budget("demo-ttft", None, "no_data"))


@pytest.mark.parametrize("seconds, text", [(0, "00:00"), (59.9, "00:59"), (205, "03:25"),
                                           (3600, "60:00"), (-3, "00:00")])
def test_the_clock_counts_minutes_and_seconds(seconds, text):
    assert clock(seconds) == text


def test_an_alert_is_told_once_when_it_fires_and_once_when_it_resolves():
    known: dict[str, str] = {}
    assert alert_changes(known, [{**_alert("pending"), "fired_at": None}]) == []
    fired = alert_changes(known, [_alert("firing")])
    assert [c.status for c in fired] == ["firing"]
    assert alert_changes(known, [_alert("firing")]) == []  # the next poll: nothing new
    assert [c.status for c in alert_changes(known, [_alert("resolved")])] == ["resolved"]
    assert alert_changes(known, [_alert("resolved")]) == []


def test_an_alert_that_fired_and_resolved_between_polls_is_told_both_ways():
    changes = alert_changes({}, [_alert("resolved")])
    assert [c.status for c in changes] == ["firing", "resolved"]


def test_a_pending_alert_that_never_fired_is_not_told():
    known: dict[str, str] = {}
    alert_changes(known, [{**_alert("pending"), "fired_at": None}])
    assert alert_changes(known, [{**_alert("resolved"), "fired_at": None}]) == []


def test_alert_lines_name_the_alert_by_its_labels():
    fired = format_alert(221.0, AlertChange("firing", _alert("firing")))
    assert fired == ("[03:41] FIRING   InferwatchSLOBurnRate{severity=page, "
                     "slo=demo-availability, window=1h/2m}: SLO demo-availability is burning "
                     "15x too fast")
    resolved = format_alert(418.0, AlertChange("resolved", _alert("resolved")))
    assert resolved == ("[06:58] RESOLVED InferwatchSLOBurnRate{severity=page, "
                        "slo=demo-availability, window=1h/2m}")


def test_on_a_terminal_the_status_line_is_rewritten_and_events_go_above_it():
    out = io.StringIO()
    console = Console(out, tty=True)
    console.status("status 1")
    console.status("status 2")
    console.event("FIRING x")
    console.close()
    assert out.getvalue() == ("\r\x1b[2Kstatus 1\r\x1b[2Kstatus 2"
                              "\r\x1b[2KFIRING x\nstatus 2\n")


def test_elsewhere_status_lines_are_plain_and_spaced_out():
    out = io.StringIO()
    console = Console(out, tty=False, plain_every_seconds=math.inf)
    console.status("status 1")   # the first is printed
    console.status("status 2")   # within the spacing: skipped
    console.event("FIRING x")
    console.close()
    assert out.getvalue() == "status 1\nFIRING x\n"
