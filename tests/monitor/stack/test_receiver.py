"""The built-in alert receiver: a real HTTP server on a free port, posted to with httpx."""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from monitor.alerting.alertmanager import AmAlert, SyncAlertmanagerClient
from monitor.stack.receiver import AlertReceiver, Notice

LABELS = {"alertname": "InferwatchSLOBurnRate", "slo": "demo-availability", "service": "demo",
          "severity": "page", "window": "1h/2m"}


@pytest.fixture
def receiver() -> Iterator[tuple[AlertReceiver, list[Notice]]]:
    seen: list[Notice] = []
    receiver = AlertReceiver(seen.append).start()
    try:
        yield receiver, seen
    finally:
        receiver.stop()


def _alert(ends_in_seconds: float | None) -> AmAlert:
    now = datetime.now(UTC)
    ends = None if ends_in_seconds is None else now + timedelta(seconds=ends_in_seconds)
    return AmAlert(LABELS, {"summary": "burning"}, starts_at=now - timedelta(minutes=1),
                   ends_at=ends)


def test_it_tells_of_an_alert_posted_by_the_monitors_client_when_it_fires_and_resolves(
        receiver):
    server, seen = receiver
    client = SyncAlertmanagerClient(server.url, timeout=5.0)  # what the monitor posts with
    client.post_alerts([_alert(ends_in_seconds=120)])
    client.post_alerts([_alert(ends_in_seconds=120)])  # a resend: nothing new
    client.post_alerts([_alert(ends_in_seconds=-1)])
    assert [(n.status, n.source) for n in seen] == [("firing", "monitor"),
                                                   ("resolved", "monitor")]
    assert seen[0].labels == LABELS and seen[0].annotations == {"summary": "burning"}
    assert seen[0].describe() == ("firing InferwatchSLOBurnRate{severity=page, "
                                  "slo=demo-availability, window=1h/2m}")
    assert server.notices == seen


def test_without_a_callback_it_logs_each_change(caplog):
    caplog.set_level("INFO", logger="monitor.stack.receiver")
    server = AlertReceiver().start()
    try:
        SyncAlertmanagerClient(server.url).post_alerts([_alert(ends_in_seconds=120)])
    finally:
        server.stop()
    assert caplog.messages == ["alert from monitor: firing InferwatchSLOBurnRate{"
                               "severity=page, slo=demo-availability, window=1h/2m}"]


def test_the_end_of_an_alert_it_never_saw_firing_is_not_news(receiver):
    server, seen = receiver
    SyncAlertmanagerClient(server.url).post_alerts([_alert(ends_in_seconds=-1)])
    assert seen == []


def test_it_takes_alertmanagers_webhook_notifications(receiver):
    server, seen = receiver
    payload = {"version": "4", "status": "firing", "receiver": "webhook",
               "alerts": [{"status": "firing", "labels": LABELS, "annotations": {},
                           "startsAt": "2026-01-01T00:00:00Z"}]}
    assert httpx.post(server.webhook_url, json=payload, timeout=5).status_code == 200
    payload["alerts"][0]["status"] = "resolved"
    assert httpx.post(server.webhook_url, json=payload, timeout=5).status_code == 200
    assert [(n.status, n.source) for n in seen] == [("firing", "alertmanager"),
                                                   ("resolved", "alertmanager")]


@pytest.mark.parametrize("path, body, status", [
    ("/api/v2/alerts", {"not": "a list"}, 400),
    ("/api/v2/alerts", [{"labels": {}}], 400),          # Alertmanager refuses no labels too
    ("/webhook", [1, 2], 400),
    ("/elsewhere", [], 404),
], ids=["api-not-a-list", "api-no-labels", "webhook-not-a-notification", "unknown-path"])
def test_what_it_cannot_take_is_refused_with_a_reason(receiver, path, body, status):
    server, seen = receiver
    resp = httpx.post(f"{server.url}{path}", json=body, timeout=5)
    assert resp.status_code == status and resp.text
    assert seen == []


def test_it_answers_readiness_like_alertmanager(receiver):
    server, _ = receiver
    assert httpx.get(f"{server.url}/-/ready", timeout=5).status_code == 200
