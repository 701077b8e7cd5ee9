"""What the generated prometheus-operator objects hand to Prometheus loads in a real one:
each PrometheusRule's groups (`promtool check rules`, as the operator writes its rule files)
and each monitor's relabelings as a scrape job (`promtool check config`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.monitor.kubernetes.schemas import REPO, documents
from tests.monitor.slo.test_rules import run_promtool

PROMETHEUS_RULES = sorted(
    path for path in (REPO / "deploy" / "kubernetes").rglob("*.yaml")
    if any(d.get("kind") == "PrometheusRule" for d in documents(path)))
MONITORS = sorted((REPO / "deploy" / "kubernetes" / "engines").glob("*monitor.yaml"))
SNAKE = {"sourceLabels": "source_labels", "targetLabel": "target_label"}


def test_there_is_a_rule_object_per_engine_one_for_the_slos_and_one_for_anomalies() -> None:
    names = {p.name for p in PROMETHEUS_RULES}
    assert {"vllm-rules.yaml", "triton-rules.yaml", "inferwatch-slo-rules.yaml",
            "inferwatch-anomaly-rules.yaml"} <= names


@pytest.mark.integration
@pytest.mark.parametrize("path", PROMETHEUS_RULES, ids=lambda p: p.name)
def test_promtool_loads_the_rule_groups(path: Path, tmp_path: Path) -> None:
    [rule] = documents(path)
    groups = rule["spec"]["groups"]
    count = sum(len(group["rules"]) for group in groups)
    rule_file = tmp_path / "rules.yml"
    rule_file.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    assert count > 0
    assert f"SUCCESS: {count} rules found" in run_promtool("check", "rules", str(rule_file))


def scrape_job(endpoint: dict[str, Any], name: str) -> dict[str, Any]:
    """The scrape job the operator makes of a monitor's endpoint (a static target in place of
    its Kubernetes service discovery), relabelings spelt as Prometheus spells them."""
    def snake(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{SNAKE.get(k, k): v for k, v in c.items()} for c in configs]
    return {"job_name": name, "honor_timestamps": endpoint["honorTimestamps"],
            "metrics_path": endpoint["path"],
            "static_configs": [{"targets": ["localhost:8000"]}],
            "relabel_configs": snake(endpoint["relabelings"]),
            "metric_relabel_configs": snake(endpoint["metricRelabelings"])}


@pytest.mark.integration
@pytest.mark.parametrize("path", MONITORS, ids=lambda p: p.name)
def test_promtool_loads_the_monitors_relabelings(path: Path, tmp_path: Path) -> None:
    [monitor] = documents(path)
    spec = monitor["spec"]
    [endpoint] = spec.get("podMetricsEndpoints") or spec["endpoints"]
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump(
        {"scrape_configs": [scrape_job(endpoint, monitor["metadata"]["name"])]}))
    assert "SUCCESS" in run_promtool("check", "config", str(config))
