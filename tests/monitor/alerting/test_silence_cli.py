"""`inferwatch silence` add / list / expire against a real Alertmanager."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from monitor import cli
from monitor.alerting import silence_cli
from monitor.alerting.alertmanager import AmAlert, ListedAlert, SyncAlertmanagerClient
from tests.monitor.alertmanager_fixture import RunningAlertmanager, running_alertmanager
from tests.processes import free_port


def silence(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    silence_cli.add_arguments(parser)
    return silence_cli.run(parser.parse_args(argv))


@pytest.fixture(scope="module")
def am(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningAlertmanager]:
    with running_alertmanager(tmp_path_factory.mktemp("am")) as am:
        yield am


def only_alert(client: SyncAlertmanagerClient, name: str, state: str) -> ListedAlert:
    deadline = time.monotonic() + 5
    while True:
        [alert] = client.list_alerts([f"alertname={name}"])
        if alert.state == state or time.monotonic() > deadline:
            return alert
        time.sleep(0.05)


@pytest.mark.integration
def test_add_list_expire(am: RunningAlertmanager, capsys: pytest.CaptureFixture[str]) -> None:
    url = ["--alertmanager-url", am.url]
    with am.client() as client:
        client.post_alerts([AmAlert({"alertname": "Maint", "slo": "chat-ttft"})])
        assert silence("add", *url, "--matcher", "slo=chat-ttft", "-m", "alertname=~Ma.*",
                       "--duration", "2h", "--comment", "maintenance", "--author", "ops") == 0
        out, err = capsys.readouterr()
        silence_id = out.strip()
        assert len(silence_id) == 36 and "until" in err and "(2h)" in err

        [created] = [s for s in client.list_silences() if s.id == silence_id]
        assert created.state == "active" and created.created_by == "ops"
        assert timedelta(hours=2) - (created.ends_at - created.starts_at) < timedelta(seconds=1)
        silenced = only_alert(client, "Maint", "suppressed")
        assert silenced.silenced_by == (silence_id,) and silenced.state == "suppressed"

        assert silence("list", *url, "--matcher", "slo=chat-ttft") == 0
        header, *rows = capsys.readouterr().out.splitlines()
        assert header.split()[:2] == ["ID", "STATE"]
        [row] = [r for r in rows if r.startswith(silence_id)]
        assert 'slo="chat-ttft" alertname=~"Ma.*"' in row and row.endswith("maintenance")
        assert "active" in row and "ops" in row

        assert silence("expire", *url, silence_id) == 0
        assert capsys.readouterr().out.strip() == f"expired {silence_id}"
        assert only_alert(client, "Maint", "active").silenced_by == ()
        assert silence("list", *url, "--matcher", "slo=chat-ttft") == 0
        assert silence_id not in capsys.readouterr().out
        assert silence("list", *url, "--matcher", "slo=chat-ttft", "--expired") == 0
        assert "expired" in [r for r in capsys.readouterr().out.splitlines()
                             if r.startswith(silence_id)][0]


@pytest.mark.integration
def test_future_start_is_pending(am: RunningAlertmanager,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    start = (datetime.now(UTC) + timedelta(days=1)).astimezone().isoformat(timespec="minutes")
    assert silence("add", "--alertmanager-url", am.url, "-m", "slo=later", "--duration", "30m",
                   "--start", start, "--comment", "tomorrow's upgrade") == 0
    silence_id = capsys.readouterr().out.strip()
    with am.client() as client:
        [created] = [s for s in client.list_silences() if s.id == silence_id]
    assert created.state == "pending"
    assert created.starts_at == datetime.fromisoformat(start).astimezone(UTC)
    assert created.created_by  # the current user by default


@pytest.mark.integration
def test_rejections_exit_1_with_alertmanagers_reason(
        am: RunningAlertmanager, capsys: pytest.CaptureFixture[str]) -> None:
    assert silence("expire", "--alertmanager-url", am.url,
                   "00000000-0000-0000-0000-000000000000") == 1
    assert "no silence 00000000-0000-0000-0000-000000000000" in capsys.readouterr().err
    assert silence("add", "--alertmanager-url", am.url, "-m", "slo=~(", "--duration", "1h",
                   "--comment", "c") == 1
    err = capsys.readouterr().err
    assert am.url in err and "HTTP 400" in err and "regexp" in err


def test_unreachable_exits_1_naming_the_url(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert silence("list", "--alertmanager-url", url, "--timeout", "1") == 1
    err = capsys.readouterr().err
    assert url in err and "cannot connect" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["-m", "slo", "--duration", "1h"], "bad matcher 'slo'"),
    (["-m", "slo=x", "--duration", "2 hours"], "'2 hours' is not a duration"),
    (["-m", "slo=x", "--duration", "1h", "--start", "2030-01-01T10:00"], "no UTC offset"),
    (["-m", "slo=x", "--duration", "1h", "--start", "tomorrow"], "not an ISO 8601 time"),
])
def test_bad_arguments_exit_2_before_any_request(argv: list[str], message: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    unreachable = f"http://127.0.0.1:{free_port()}"
    assert silence("add", "--alertmanager-url", unreachable, *argv, "--comment", "c") == 2
    assert message in capsys.readouterr().err


def test_registered_in_inferwatch_cli(capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv(silence_cli.URL_ENV, url)
    assert cli.main(["silence", "list"]) == 1
    assert url in capsys.readouterr().err
