"""The files the demo writes: SLOs that page within minutes, a monitor config that validates."""

import pytest
import yaml

from monitor.collect.config import load_config
from monitor.slo.loaders import load_slos
from monitor.slo.windows import Severity, burn_windows
from monitor.stack.configs import MonitorFiles, write_rules, write_slos


def test_the_demo_slos_page_on_a_1h_and_2m_window_at_3_36x(tmp_path):
    path, slos = write_slos(tmp_path)
    assert [s.name for s in slos] == ["demo-availability", "demo-ttft"]
    assert load_slos(path) == slos  # the file is what the monitor reads
    for slo in slos:
        (window,) = burn_windows(slo)
        # 2% of a 7-day budget in 1 h: 0.02 * 168 h / 1 h = 3.36
        assert (window.severity, window.name) == (Severity.PAGE, "1h/2m")
        assert window.factor == pytest.approx(3.36)
        assert slo.objective == 0.99 and slo.alerting.min_events == 20
    # at 99%, a 50% error rate burns 50x: a page once both windows hold enough of it
    assert 0.5 / slos[0].error_budget > 3.36


def test_the_monitor_config_validates_and_points_at_the_stack(tmp_path):
    slos_path, _ = write_slos(tmp_path)
    files = MonitorFiles(tmp_path, "http://127.0.0.1:8000", slos_path, "http://127.0.0.1:9093")
    config = load_config(files.write(8080))
    (target,) = config.targets
    assert target.url == "http://127.0.0.1:8000/metrics"
    assert target.scrape_interval_seconds == 2
    assert config.store.url == f"sqlite:///{tmp_path / 'inferwatch.db'}"
    assert config.alerting.alertmanager_urls == ("http://127.0.0.1:9093",)
    assert config.alerting.external_url == "http://127.0.0.1:8080"
    assert (tmp_path / config.slos[0]).samefile(slos_path)  # relative to the config file


def test_the_prometheus_rules_come_from_the_same_slos(tmp_path):
    _, slos = write_slos(tmp_path)
    rules = yaml.safe_load(write_rules(tmp_path / "prometheus", slos).read_text())
    alerts = [r for g in rules["groups"] for r in g["rules"] if "alert" in r]
    pages = [a for a in alerts if a["alert"] == "InferwatchSLOBurnRate"]
    assert sorted(a["labels"]["slo"] for a in pages) == ["demo-availability", "demo-ttft"]
    assert {a["labels"]["window"] for a in pages} == {"1h/2m"}
