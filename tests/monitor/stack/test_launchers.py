"""The demo's launchers start and stop the real Prometheus and Alertmanager (integration)."""

import time
from pathlib import Path

import httpx
import pytest

from monitor.alerting.alertmanager import AmAlert
from monitor.stack.alertmanager import alertmanager_binary, start_alertmanager, webhook_config
from monitor.stack.configs import write_rules, write_slos
from monitor.stack.prometheus import prometheus_binary, prometheus_config, start_prometheus
from monitor.stack.receiver import AlertReceiver, Notice
from tests.integration import unavailable

pytestmark = pytest.mark.integration


def _binary(found: str | None, package: str) -> str:
    if found is None:
        unavailable(f"{package} is not installed (apt-get install {package})")
    return found


def _wait(condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout} s")
        time.sleep(0.1)


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def test_alertmanager_starts_notifies_the_webhook_and_stops(tmp_path):
    binary = _binary(alertmanager_binary(), "prometheus-alertmanager")
    seen: list[Notice] = []
    receiver = AlertReceiver(seen.append).start()
    try:
        am = start_alertmanager(binary, tmp_path / "am", webhook_config(receiver.webhook_url))
        try:
            alert = AmAlert({"alertname": "InferwatchSLOBurnRate", "slo": "demo-availability",
                             "severity": "page"}, {"summary": "burning"})
            resp = httpx.post(f"{am.url}/api/v2/alerts", json=[alert.to_json()], timeout=5)
            assert resp.status_code == 200
            _wait(lambda: any(n.source == "alertmanager" for n in seen))
        finally:
            am.stop()
    finally:
        receiver.stop()
    assert seen[0].status == "firing" and seen[0].labels["slo"] == "demo-availability"
    assert _gone(am.child.pid)
    assert (tmp_path / "am" / "alertmanager.yml").exists()


def test_prometheus_starts_with_the_demo_slo_rules_scrapes_and_stops(tmp_path):
    binary = _binary(prometheus_binary(), "prometheus")
    _, slos = write_slos(tmp_path)
    rules = write_rules(tmp_path / "prometheus", slos)
    receiver = AlertReceiver().start()
    try:
        # A target that is down (the rules load either way); alerts go to the receiver.
        config = prometheus_config({"down": "http://127.0.0.1:1"}, interval_seconds=1,
                                   rule_files=[str(rules)], alertmanager_url=receiver.url,
                                   external_labels={"evaluator": "prometheus"})
        prom = start_prometheus(binary, tmp_path / "prometheus", config)
        try:
            groups = httpx.get(f"{prom.url}/api/v1/rules", timeout=5).json()["data"]["groups"]
            names = {rule["name"] for group in groups for rule in group["rules"]}
            assert "InferwatchSLOBurnRate" in names
            assert {g["file"] for g in groups} == {str(rules)}
            # the alerting side is wired: Prometheus has discovered the receiver
            _wait(lambda: httpx.get(f"{prom.url}/api/v1/alertmanagers", timeout=5)
                  .json()["data"]["activeAlertmanagers"] != [])
        finally:
            prom.stop()
    finally:
        receiver.stop()
    assert _gone(prom.child.pid)


def test_the_scrape_config_names_each_job_by_host_and_port():
    config = prometheus_config({"reference-0": "http://127.0.0.1:8000", "inferwatch":
                                "http://127.0.0.1:8080/"}, interval_seconds=5,
                               alertmanager_url="http://127.0.0.1:9093")
    assert config["scrape_configs"] == [
        {"job_name": "reference-0", "static_configs": [{"targets": ["127.0.0.1:8000"]}]},
        {"job_name": "inferwatch", "static_configs": [{"targets": ["127.0.0.1:8080"]}]}]
    assert config["global"]["scrape_interval"] == "5s"
    assert config["alerting"] == {"alertmanagers": [
        {"static_configs": [{"targets": ["127.0.0.1:9093"]}]}]}
