"""The prometheus-operator objects carry exactly what `inferwatch scrape-config` and
`inferwatch rules generate` put in the plain Prometheus files (compared with the checked-in
files of deploy/prometheus/ and alerts/), in the CRDs' spelling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from exporters.adapters.table import load_tables
from monitor.kubernetes import (
    ScrapeTarget,
    camel_relabelings,
    engine_files,
    pod_monitor,
    service_monitor,
)
from monitor.kubernetes.generate import SLO_RULES_FILE

REPO = Path(__file__).resolve().parents[3]
ENGINES = sorted(load_tables())
SNAKE = {"sourceLabels": "source_labels", "targetLabel": "target_label"}


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def snake(relabelings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{SNAKE.get(k, k): v for k, v in config.items()} for config in relabelings]


def test_relabel_keys_are_translated_to_camel_case() -> None:
    assert camel_relabelings([{"source_labels": ["__name__", "le"], "regex": "(.+)",
                               "target_label": "le", "replacement": "${1}.0"}]) == [
        {"sourceLabels": ["__name__", "le"], "regex": "(.+)", "targetLabel": "le",
         "replacement": "${1}.0"}]


def test_a_relabel_key_the_crd_lacks_is_refused_not_passed_through() -> None:
    with pytest.raises(ValueError, match=r"\[1\]: no CRD field for honor_labels"):
        camel_relabelings([{"action": "keep", "regex": "x"}, {"honor_labels": True}])


@pytest.mark.parametrize("build", [pod_monitor, service_monitor], ids=["pod", "service"])
def test_a_monitor_sets_job_to_the_engine_and_keeps_timestamps_off(build: Any) -> None:
    target = ScrapeTarget(job="vllm", selector={"app": "vllm"}, port="http",
                          labels={"release": "prom"})
    manifest = build("w", target, [{"action": "drop", "regex": "x"}])
    [endpoint] = manifest["spec"].get("podMetricsEndpoints") or manifest["spec"]["endpoints"]
    assert endpoint["relabelings"] == [{"action": "replace", "targetLabel": "job",
                                        "replacement": "vllm"}]
    assert endpoint["honorTimestamps"] is False and endpoint["port"] == "http"
    assert endpoint["metricRelabelings"] == [{"action": "drop", "regex": "x"}]
    assert manifest["spec"]["selector"] == {"matchLabels": {"app": "vllm"}}
    assert manifest["metadata"]["labels"] == {"app.kubernetes.io/part-of": "inferwatch",
                                              "release": "prom"}


@pytest.mark.parametrize("engine", ENGINES)
def test_monitors_carry_the_scrape_configs_metric_relabelings(engine: str) -> None:
    [job] = load(REPO / "deploy" / "prometheus" / f"{engine}-scrape.yml")["scrape_configs"]
    files = {name: yaml.safe_load(text) for name, text in engine_files(engine, "r").items()}
    pod = files[f"engines/{engine}-podmonitor.yaml"]["spec"]["podMetricsEndpoints"][0]
    service = files[f"engines/{engine}-servicemonitor.yaml"]["spec"]["endpoints"][0]
    assert job["metric_relabel_configs"]  # at least the final keep
    assert snake(pod["metricRelabelings"]) == job["metric_relabel_configs"]
    assert snake(service["metricRelabelings"]) == job["metric_relabel_configs"]
    assert pod["relabelings"][0]["replacement"] == job["job_name"] == engine


@pytest.mark.parametrize("engine", ENGINES)
def test_the_engines_prometheus_rule_holds_its_recording_rules(engine: str) -> None:
    [plain] = load(REPO / "deploy" / "prometheus" / f"{engine}-rules.yml")["groups"]
    files = engine_files(engine, "r")
    if not plain["rules"]:  # relabeling does it all (the engine speaks the schema)
        assert f"engines/{engine}-rules.yaml" not in files
        assert "needs no recording rules" in files[f"engines/{engine}-podmonitor.yaml"]
        return
    rule = yaml.safe_load(files[f"engines/{engine}-rules.yaml"])
    assert rule["kind"] == "PrometheusRule"
    assert rule["spec"]["groups"] == [plain]


def test_the_slo_prometheus_rule_holds_the_checked_in_slo_rules() -> None:
    plain = load(REPO / "alerts" / "inferwatch-slo.rules.yml")
    rule = load(REPO / "deploy" / "kubernetes" / SLO_RULES_FILE)
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    *slo_groups, target_down = rule["spec"]["groups"]
    *plain_slo_groups, plain_target_down = plain["groups"]
    assert alerts and slo_groups == plain_slo_groups
    # In a cluster the target-down rule watches the engines' jobs only, not every target.
    assert target_down["rules"][0]["expr"].startswith('up{job=~"dcgm|inferwatch|')
    assert plain_target_down["rules"][0]["expr"] == "up == 0"
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
