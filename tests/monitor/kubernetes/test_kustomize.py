"""The monitor's kustomize base and the kube-prometheus-stack overlay: the config the
ConfigMap carries loads with the monitor's own loaders, and `kubectl kustomize` renders both
directories into objects that validate (integration: needs kubectl)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.collect.config import load_config
from monitor.service.reload import SloFiles
from tests.monitor.kubernetes.schemas import REPO, kubectl, validate

DEPLOY = REPO / "deploy" / "kubernetes"
CONFIG = DEPLOY / "monitor" / "config" / "inferwatch.yaml"


def test_the_monitors_config_and_slo_files_load(tmp_path: Path) -> None:
    config = load_config(CONFIG)
    assert [t.promql_selector for t in config.targets] == ['job="vllm"']
    # As mounted: the config in config/, the SLO ConfigMap beside it in slos/.
    slos = SloFiles().load(config, CONFIG.parent)
    assert len(slos) == len({s.name for s in slos}) > 0


def render(directory: Path) -> list[dict[str, Any]]:
    done = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    return [d for d in yaml.safe_load_all(done.stdout) if d is not None]


def named(objects: list[dict[str, Any]], kind: str, prefix: str) -> dict[str, Any]:
    [found] = [o for o in objects
               if o["kind"] == kind and o["metadata"]["name"].startswith(prefix)]
    return found


@pytest.mark.integration
def test_the_base_renders_a_deployment_wired_to_its_config_maps() -> None:
    objects = render(DEPLOY / "monitor")
    assert sorted(o["kind"] for o in objects) == [
        "ConfigMap", "ConfigMap", "Deployment", "PodDisruptionBudget", "Service"]
    for manifest in objects:
        validate(manifest)
    config = named(objects, "ConfigMap", "inferwatch-config-")
    slos = named(objects, "ConfigMap", "inferwatch-slos-")
    assert config["data"] == {"inferwatch.yaml": CONFIG.read_text()}
    assert slos["data"]["inference.yaml"] == (REPO / "alerts/slos/inference.yaml").read_text()
    pod = named(objects, "Deployment", "inferwatch")["spec"]["template"]
    volumes = {v["name"]: v.get("configMap", {}).get("name") for v in pod["spec"]["volumes"]}
    # kustomize rewrote the references to the hashed names.
    assert volumes["config"] == config["metadata"]["name"]
    assert volumes["slos"] == slos["metadata"]["name"]
    service = named(objects, "Service", "inferwatch")
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()


@pytest.mark.integration
def test_the_overlay_adds_what_kube_prometheus_stack_selects() -> None:
    objects = render(DEPLOY / "kube-prometheus-stack")
    for manifest in objects:
        validate(manifest)
    monitor = named(objects, "ServiceMonitor", "inferwatch-monitor")
    rules = named(objects, "PrometheusRule", "inferwatch-slo")
    service = named(objects, "Service", "inferwatch")
    for selected in (monitor, rules):
        assert selected["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= \
        service["metadata"]["labels"].items()
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
