"""The Alertmanager client against the real Alertmanager, and the shipped routing config.

Pure parsing and validation first; then one Alertmanager shared by the listing tests (each
uses its own alert names), and Alertmanagers of their own where notifications are counted.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import pytest

from monitor.alerting.alertmanager import (
    AlertmanagerClient,
    AlertmanagerRejected,
    AlertmanagerUnavailable,
    AmAlert,
    Matcher,
    MatcherError,
    SyncAlertmanagerClient,
    format_time,
    parse_matcher,
    parse_time,
)
from tests.processes import free_port
from tests.monitor.alertmanager_fixture import (
    RunningAlertmanager,
    amtool_binary,
    running_alertmanager,
    webhook_config,
    webhook_receiver,
    with_webhook_receivers,
)

CONFIG = Path(__file__).parents[3] / "alerts" / "alertmanager.yml"
T = TypeVar("T")


def eventually(probe: Callable[[], T], ok: Callable[[T], bool], timeout: float = 5.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if ok(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


# --- matchers, alerts, times (no Alertmanager) ---------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("slo=chat-ttft", Matcher("slo", "chat-ttft")),
    ("severity!=page", Matcher("severity", "page", is_equal=False)),
    ("service=~chat|embed", Matcher("service", "chat|embed", is_regex=True)),
    ("service!~batch.*", Matcher("service", "batch.*", is_regex=True, is_equal=False)),
    (' slo = "a \\"quoted\\" = value" ', Matcher("slo", 'a "quoted" = value')),
    ("url=http://x/?a=b", Matcher("url", "http://x/?a=b")),
])
def test_parse_matcher(text: str, expected: Matcher) -> None:
    assert parse_matcher(text) == expected
    assert parse_matcher(str(expected)) == expected  # str() is the filter syntax, parseable


@pytest.mark.parametrize("text", ["slo", "=value", "9slo=x", "slo~x", 'slo="open', "s-lo=x"])
def test_bad_matcher_names_itself(text: str) -> None:
    with pytest.raises(MatcherError, match="bad matcher") as info:
        parse_matcher(text)
    assert repr(text) in str(info.value)


def test_alert_is_checked_and_normalised_like_alertmanager_does() -> None:
    start = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    alert = AmAlert({"alertname": "A", "empty": ""}, {"summary": "s"}, starts_at=start)
    assert dict(alert.labels) == {"alertname": "A"}  # empty means absent
    assert alert.starts_at == start.replace(microsecond=123000)
    assert AmAlert.from_json(alert.to_json()) == alert
    assert alert.to_json() == {"labels": {"alertname": "A"}, "annotations": {"summary": "s"},
                               "startsAt": "2024-05-01T12:00:00.123Z"}
    with pytest.raises(ValueError, match="at least one label"):
        AmAlert({"alertname": ""})
    with pytest.raises(ValueError, match="invalid annotation name 'bad-name'"):
        AmAlert({"alertname": "A"}, {"bad-name": "x"})
    with pytest.raises(ValueError, match="before starts_at"):
        AmAlert({"alertname": "A"}, starts_at=start, ends_at=start - timedelta(seconds=1))
    with pytest.raises(ValueError, match="no time zone"):
        AmAlert({"alertname": "A"}, starts_at=datetime(2024, 5, 1))


def test_times() -> None:
    assert parse_time("2024-05-01T12:00:00.123456789Z") == datetime(
        2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    assert parse_time("2024-05-01T14:00:00+02:00") == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert parse_time("0001-01-01T00:00:00Z") is None  # Go's zero time
    assert format_time(datetime(2024, 5, 1, 14, tzinfo=UTC).astimezone()) == (
        "2024-05-01T14:00:00.000Z")


def test_connection_refused_is_unavailable_and_names_the_url() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with SyncAlertmanagerClient(url) as client, pytest.raises(AlertmanagerUnavailable) as info:
        client.list_alerts()
    assert url in str(info.value) and "cannot connect (Connection refused)" in str(info.value)
    assert info.value.retryable


def test_timeout_is_unavailable() -> None:
    with socket.socket() as silent:  # the kernel accepts connections; nobody ever answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with SyncAlertmanagerClient(url, timeout=0.2) as client:
            with pytest.raises(AlertmanagerUnavailable, match="timed out after 0.2 s"):
                client.status()


# --- the shipped configuration -------------------------------------------------------------

def test_example_config_passes_amtool() -> None:
    result = subprocess.run([amtool_binary(), "check-config", str(CONFIG)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout and "1 inhibit rules" in result.stdout


@pytest.mark.parametrize(("labels", "receiver"), [
    (["severity=page", "slo=chat-ttft"], "pager"),
    (["severity=ticket", "slo=chat-ttft"], "chat"),
    (["severity=warning"], "chat"),
    (["alertname=Other"], "chat"),
    (["alertname=InferwatchAnomaly", "target=llm-0", "severity=page"], "pager"),
    (["alertname=InferwatchAnomaly", "target=llm-0", "severity=ticket"], "chat"),
])
def test_example_config_routes_by_severity(labels: list[str], receiver: str) -> None:
    result = subprocess.run([amtool_binary(), "config", "routes", "test",
                             f"--config.file={CONFIG}", *labels],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == receiver


@pytest.mark.integration
def test_example_inhibition_in_real_alertmanager(tmp_path: Path) -> None:
    """A firing page of an SLO and service silences that SLO's ticket, and nothing else."""
    with webhook_receiver() as hook, running_alertmanager(
            tmp_path, with_webhook_receivers(CONFIG.read_text(), hook.url)) as am, \
            am.client() as client:
        def alert(severity: str, slo: str) -> AmAlert:
            return AmAlert({"alertname": "InferwatchSLOBurnRate", "severity": severity,
                            "slo": slo, "service": "chat"})
        page, ticket, other = alert("page", "ttft"), alert("ticket", "ttft"), alert("ticket", "x")
        client.post_alerts([page, ticket, other])
        listed = eventually(lambda: {a.fingerprint: a for a in client.list_alerts()},
                            lambda seen: bool(seen.get(ticket.fingerprint)
                                              and seen[ticket.fingerprint].inhibited_by))
        assert listed[ticket.fingerprint].inhibited_by == (page.fingerprint,)
        assert listed[ticket.fingerprint].state == "suppressed"
        assert listed[page.fingerprint].state == "active"
        assert listed[page.fingerprint].receivers == ("pager",)
        assert listed[other.fingerprint].state == "active"
        assert listed[other.fingerprint].receivers == ("chat",)


# --- against a real Alertmanager -----------------------------------------------------------

@pytest.fixture(scope="module")
def shared_am(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAlertmanager]:
    with running_alertmanager(tmp_path_factory.mktemp("am")) as am:
        yield am


@pytest.fixture
def client(shared_am: RunningAlertmanager) -> Iterator[SyncAlertmanagerClient]:
    with shared_am.client() as client:
        yield client


@pytest.mark.integration
def test_posted_alert_is_listed_with_labels_and_annotations(
        client: SyncAlertmanagerClient) -> None:
    start = datetime.now(UTC) - timedelta(minutes=1)
    alert = AmAlert({"alertname": "Listed", "slo": "chat-ttft", "severity": "page"},
                    {"summary": "TTFT budget burning"}, starts_at=start,
                    generator_url="http://inferwatch.example/slo/chat-ttft")
    client.post_alerts([alert, AmAlert({"alertname": "Listed", "slo": "other"})])
    [listed] = client.list_alerts(["alertname=Listed", 'slo=~"chat-.*"'])
    assert listed.alert.labels == alert.labels
    assert listed.annotations == {"summary": "TTFT budget burning"}
    assert listed.alert.starts_at == alert.starts_at
    assert listed.alert.generator_url == alert.generator_url
    assert listed.fingerprint == alert.fingerprint  # the same identity as Alertmanager's
    assert listed.state == "active" and listed.receivers == ("none",)
    assert len(client.list_alerts(["alertname=Listed"])) == 2


@pytest.mark.integration
def test_alert_ending_now_is_resolved(client: SyncAlertmanagerClient) -> None:
    alert = AmAlert({"alertname": "Resolved"}, starts_at=datetime.now(UTC) - timedelta(1))
    client.post_alerts([alert])
    assert len(client.list_alerts(["alertname=Resolved"])) == 1
    client.post_alerts([alert.resolved()])
    assert eventually(lambda: client.list_alerts(["alertname=Resolved"]), lambda a: not a) == []


@pytest.mark.integration
def test_async_client(shared_am: RunningAlertmanager) -> None:
    async def scenario() -> None:
        async with AlertmanagerClient(shared_am.url) as client:
            await client.post_alerts([AmAlert({"alertname": "Async"})])
            assert [a.labels["alertname"] for a in await client.list_alerts(
                ["alertname=Async"])] == ["Async"]
            status = await client.status()
            assert status.version.startswith("0.") and status.cluster_status == "disabled"
            assert "receivers" in status.config_yaml
    asyncio.run(scenario())


@pytest.mark.integration
def test_bad_alert_is_rejected_not_unavailable(client: SyncAlertmanagerClient,
                                               shared_am: RunningAlertmanager) -> None:
    start = datetime.now(UTC)
    bad = AmAlert({"alertname": "Bad"}, starts_at=start)
    object.__setattr__(bad, "ends_at", start - timedelta(hours=1))  # what the checks refuse
    with pytest.raises(AlertmanagerRejected) as info:
        client.post_alerts([bad])
    assert info.value.status == 400 and not info.value.retryable
    assert shared_am.url in str(info.value)
    assert "start time must be before end time" in str(info.value)


@pytest.mark.integration
def test_unknown_silence_is_rejected(client: SyncAlertmanagerClient) -> None:
    with pytest.raises(AlertmanagerRejected, match="no silence 00000000-"):
        client.expire_silence("00000000-0000-0000-0000-000000000000")
    with pytest.raises(ValueError, match="not a silence ID"):
        client.expire_silence("nonsense")


@pytest.mark.integration
def test_resent_alert_notifies_once(tmp_path: Path) -> None:
    """The same alert (same startsAt) posted again and again is one firing notification."""
    with webhook_receiver() as hook, running_alertmanager(
            tmp_path, webhook_config(hook.url)) as am, am.client() as client:
        alert = AmAlert({"alertname": "Resent", "slo": "chat-ttft"},
                        starts_at=datetime.now(UTC) - timedelta(minutes=5))
        for _ in range(3):
            client.post_alerts([alert])
            time.sleep(0.2)
        hook.wait_for(lambda n: len(n) >= 1)
        client.post_alerts([alert])
        time.sleep(1.6)  # a group_interval flush (1 s) in which nothing may be sent
        assert len(hook.alerts("firing")) == 1, hook.notifications
        client.post_alerts([alert.resolved()])
        hook.wait_for(lambda n: any(a["status"] == "resolved" for x in n for a in x["alerts"]))
        assert len(hook.notifications) == 2


@pytest.mark.integration
def test_restart_keeps_the_notification_log(tmp_path: Path) -> None:
    """Alertmanager forgets alerts on a restart but not what it notified: the same alert
    posted again afterwards is not a second page (the fixture's restart keeps the storage)."""
    with webhook_receiver() as hook, running_alertmanager(
            tmp_path, webhook_config(hook.url)) as am:
        alert = AmAlert({"alertname": "Restarted"},
                        starts_at=datetime.now(UTC) - timedelta(minutes=5))
        with am.client() as client:
            client.post_alerts([alert])
            hook.wait_for(lambda n: len(n) >= 1)
        am.restart()
        with am.client() as client:
            assert client.list_alerts(["alertname=Restarted"]) == []
            client.post_alerts([alert])
            assert len(client.list_alerts(["alertname=Restarted"])) == 1
        time.sleep(2.5)  # group_wait and a group_interval in which nothing may be sent
        assert len(hook.alerts("firing")) == 1, hook.notifications


@pytest.mark.integration
def test_example_inhibition_of_anomalies_is_per_target(tmp_path: Path) -> None:
    """A critical anomaly (page) on a target silences that target's anomaly ticket, and
    neither another target's ticket nor an SLO's."""
    with webhook_receiver() as hook, running_alertmanager(
            tmp_path, with_webhook_receivers(CONFIG.read_text(), hook.url)) as am, \
            am.client() as client:
        def anomaly(severity: str, target: str) -> AmAlert:
            return AmAlert({"alertname": "InferwatchAnomaly", "severity": severity,
                            "target": target})
        page, ticket, other = (anomaly("page", "a"), anomaly("ticket", "a"),
                               anomaly("ticket", "b"))
        slo_ticket = AmAlert({"alertname": "InferwatchSLOBurnRate", "severity": "ticket",
                              "slo": "ttft"})
        client.post_alerts([page, ticket, other, slo_ticket])
        listed = eventually(lambda: {a.fingerprint: a for a in client.list_alerts()},
                            lambda seen: bool(seen.get(ticket.fingerprint)
                                              and seen[ticket.fingerprint].inhibited_by
                                              and len(seen) == 4))
        assert listed[ticket.fingerprint].inhibited_by == (page.fingerprint,)
        assert listed[page.fingerprint].receivers == ("pager",)
        assert listed[other.fingerprint].state == "active"
        assert listed[slo_ticket.fingerprint].state == "active"
