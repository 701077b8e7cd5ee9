"""The rule groups inside every generated PrometheusRule load in a real Prometheus:
`promtool check rules` on each object's spec (what the operator writes to its rule files)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.monitor.kubernetes.schemas import REPO, documents
from tests.monitor.slo.test_rules import run_promtool

PROMETHEUS_RULES = sorted(
    path for path in (REPO / "deploy" / "kubernetes").rglob("*.yaml")
    if any(d.get("kind") == "PrometheusRule" for d in documents(path)))


def test_there_is_a_rule_object_per_engine_and_one_for_the_slos() -> None:
    names = {p.name for p in PROMETHEUS_RULES}
    assert {"vllm-rules.yaml", "triton-rules.yaml", "inferwatch-slo-rules.yaml"} <= names


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
