"""Reloading a running `inferwatch serve` (a child process) like Prometheus: SIGHUP or
POST /-/reload re-reads inferwatch.yaml and its SLO files. An edited SLO changes while the
others keep their state and their alerts (a real Alertmanager sees nothing re-sent); a bad file
keeps the running configuration and says where it is wrong."""

from __future__ import annotations

import math
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from monitor.api import create_app
from monitor.store import open_store
from monitor.store.db import TargetInfo
from tests.asgi_thread import serving
from tests.monitor.alertmanager_fixture import (
    RunningAlertmanager,
    running_alertmanager,
    webhook_config,
    webhook_receiver,
)
from tests.monitor.api.conftest import build_state
from tests.monitor.api.test_serve import eventually, listening_url, serve
from tests.monitor.store.builders import SCRAPE_SECONDS, up

TOKEN = "reload-test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def slo_file(name: str, objective: float) -> str:
    return (f"slos:\n  - name: {name}\n    sli: {{kind: availability, errors: [timeout]}}\n"
            f"    objective: {objective}\n    window: 30d\n")


def config_text(tmp: Path, alertmanager_url: str, interval: float = 1.0) -> str:
    return (f'store: {{url: "sqlite:///{tmp / "store.db"}"}}\n'
            "slos: [burning.yaml, edited.yaml]\n"
            f"alerting: {{evaluation_interval_seconds: 1, settle_seconds: 1, "
            f"resend_seconds: 3600, alertmanager_urls: ['{alertmanager_url}']}}\n"
            "anomaly: {enabled: false}\n"
            "targets:\n  - {name: dead, url: 'http://127.0.0.1:9/metrics', "
            f"scrape_interval_seconds: {interval}, scrape_timeout_seconds: 0.5}}\n")


def fill_store(tmp: Path) -> None:
    """Half the requests of target ``ref`` time out, from an hour ago to 20 minutes ahead
    (the evaluator reads only closed minutes): every SLO over it burns 50x its budget."""
    store = open_store(f"sqlite:///{tmp / 'store.db'}")
    try:
        store.migrate()
        store.register_target(TargetInfo("ref", "http://127.0.0.1:9/metrics", "auto",
                                         {"model": "tiny"}))
        end = math.floor(time.time() / 60) * 60 + 20 * 60
        ends = [end - k * SCRAPE_SECONDS for k in range(80 * 4)][::-1]
        store.write([up("ref", t, requests=10, errors=5) for t in ends])
    finally:
        store.close()


@dataclass
class Served:
    url: str
    proc: subprocess.Popen[str]
    tmp: Path
    am: RunningAlertmanager

    def get(self, path: str) -> Any:
        response = httpx.get(f"{self.url}{path}", timeout=10)
        assert response.status_code == 200, response.text
        return response.json()

    def alerts(self, slo: str, state: str = "firing") -> dict[str, dict[str, Any]]:
        """The book's alerts of an SLO in a state, by window."""
        return {a["labels"]["window"]: a for a in self.get("/api/v1/alerts")["items"]
                if a["labels"].get("slo") == slo and a["state"] == state}

    def metric(self, name: str) -> float:
        for line in httpx.get(f"{self.url}/metrics", timeout=10).text.splitlines():
            if line.startswith(f"{name} "):
                return float(line.split()[1])
        raise KeyError(name)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with webhook_receiver() as receiver, running_alertmanager(
            tmp_path, webhook_config(receiver.url, group_by=("slo", "window"))) as am:
        fill_store(tmp_path)
        (tmp_path / "burning.yaml").write_text(slo_file("burning", 0.99))
        (tmp_path / "edited.yaml").write_text(slo_file("edited", 0.99))
        (tmp_path / "inferwatch.yaml").write_text(config_text(tmp_path, am.url))
        proc = serve("--config", str(tmp_path / "inferwatch.yaml"), "--port", "0",
                     "--token", TOKEN)
        try:
            yield Served(listening_url(proc), proc, tmp_path, am)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)


def am_alerts(am: RunningAlertmanager, slo: str) -> dict[str, Any]:
    """Alertmanager's active alerts of an SLO, by window."""
    with am.client() as client:
        return {a.labels["window"]: a for a in client.list_alerts([f"slo={slo}"])
                if a.alert.ends_at is None or not a.alert.is_resolved()}


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_sighup_applies_an_edited_slo_and_the_others_alerts_are_not_resent(
        served: Served) -> None:
    windows = {"1h/5m", "6h/30m", "1d/2h", "3d/6h"}  # every window burns at 50x
    eventually(lambda: set(am_alerts(served.am, "burning")) == windows
               and set(am_alerts(served.am, "edited")) == windows)
    book_before = served.alerts("burning")
    am_before = {w: (a.alert.starts_at, a.updated_at)
                 for w, a in am_alerts(served.am, "burning").items()}
    slo_before = served.get("/api/v1/slos/burning")
    assert slo_before["budget_remaining"] == pytest.approx(1 - 0.5 / 0.01)

    (served.tmp / "edited.yaml").write_text(slo_file("edited", 0.4))  # 0.5/0.6: 0.83x
    sent = time.time()
    served.proc.send_signal(signal.SIGHUP)
    reload = eventually(lambda: (r := served.get("/api/v1/status/config")["last_reload"])[
        "trigger"] == "SIGHUP" and r)
    assert reload["successful"] and reload["at"] >= sent
    assert reload["changes"]["slos"] == {"added": [], "changed": ["edited"], "removed": []}
    assert served.get("/api/v1/slos/edited")["objective"] == 0.4

    # The edited SLO no longer burns: its alerts resolve, in the book and in Alertmanager.
    eventually(lambda: served.alerts("edited") == {} and am_alerts(served.am, "edited") == {})
    time.sleep(3)  # three more evaluation rounds after the reload
    # The other SLO: same budget, same alerts with the same startsAt, nothing re-sent.
    slo_after = served.get("/api/v1/slos/burning")
    assert slo_after["budget_remaining"] == pytest.approx(slo_before["budget_remaining"])
    assert slo_after["state"] == "burning"
    book_after = served.alerts("burning")
    assert {w: (a["active_at"], a["fired_at"]) for w, a in book_after.items()} == {
        w: (a["active_at"], a["fired_at"]) for w, a in book_before.items()}
    assert {w: (a.alert.starts_at, a.updated_at)
            for w, a in am_alerts(served.am, "burning").items()} == am_before


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_bad_file_keeps_the_running_config_and_says_where_until_fixed(
        served: Served) -> None:
    eventually(lambda: served.get("/api/v1/slos/burning")["state"] == "burning")
    assert served.metric("inferwatch_config_last_reload_successful") == 1.0
    started = served.metric("inferwatch_config_last_reload_success_timestamp_seconds")
    config = served.tmp / "inferwatch.yaml"
    good_config = config.read_text()

    bad_slo = served.tmp / "edited.yaml"
    bad_slo.write_text(slo_file("edited", 1.5) + "    surprise: 1\n")
    response = httpx.post(f"{served.url}/-/reload", headers=AUTH, timeout=30)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_config" and error["file"] == str(bad_slo)
    assert any(p.startswith("slos[0].objective:") for p in error["problems"]), error
    assert any(p.startswith("slos[0].surprise:") for p in error["problems"]), error
    assert served.metric("inferwatch_config_last_reload_successful") == 0.0

    # A bad inferwatch.yaml: the running targets stay.
    config.write_text(good_config.replace("scrape_interval_seconds: 1.0",
                                          "scrape_interval_seconds: 0.25"))
    bad_slo.write_text(slo_file("edited", 0.9))
    response = httpx.post(f"{served.url}/-/reload", headers=AUTH, timeout=30)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["file"] == str(config)
    assert error["problems"] == ["targets[0].scrape_timeout_seconds: 0.5 s must be less than "
                                 "scrape_interval_seconds (0.25 s), or scrapes would overlap"]
    status = served.get("/api/v1/status/config")
    assert status["last_reload"]["successful"] is False
    assert status["last_successful_reload_at"] == started
    assert status["slos"] == ["burning", "edited"]
    assert served.get("/api/v1/slos/edited")["objective"] == 0.99  # the old config serves
    assert served.get("/api/v1/targets/dead")["scrape_interval_seconds"] == 1.0

    config.write_text(config_text(served.tmp, served.am.url, interval=2.0)
                      .replace("burning.yaml, edited.yaml", "edited.yaml"))
    response = httpx.post(f"{served.url}/-/reload", headers=AUTH, timeout=30)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["successful"] and body["trigger"] == "api"
    assert body["changes"]["slos"] == {"added": [], "changed": ["edited"],
                                       "removed": ["burning"]}
    assert body["changes"]["targets"] == {"added": [], "changed": ["dead"], "removed": []}
    assert served.metric("inferwatch_config_last_reload_successful") == 1.0
    assert served.metric("inferwatch_config_last_reload_success_timestamp_seconds") > started
    assert [s["name"] for s in served.get("/api/v1/slos")["items"]] == ["edited"]
    assert served.get("/api/v1/targets/dead")["scrape_interval_seconds"] == 2.0
    # The removed SLO's alerts resolve (as Prometheus resolves a deleted rule's alerts).
    eventually(lambda: served.alerts("burning") == {} and am_alerts(served.am, "burning") == {})

    served.proc.send_signal(signal.SIGTERM)
    out, _ = served.proc.communicate(timeout=30)
    assert f"configuration reload (api) failed; keeping the running configuration: {bad_slo}" \
        in out


@pytest.mark.integration
def test_reload_without_the_token_is_refused(served: Served) -> None:
    no_token = httpx.post(f"{served.url}/-/reload", timeout=10)
    wrong = httpx.post(f"{served.url}/-/reload", timeout=10,
                       headers={"Authorization": "Bearer not-the-token-at-all"})
    for response in (no_token, wrong):
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "unauthorized"
    assert served.get("/api/v1/status/config")["last_reload"]["trigger"] == "start"


def test_a_monitor_without_a_token_accepts_no_reload(tmp_path: Path) -> None:
    state = build_state(tmp_path, None)
    with serving(create_app(state)) as url:
        response = httpx.post(f"{url}/-/reload", timeout=10)
    state.store.close()
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
