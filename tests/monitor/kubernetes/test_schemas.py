"""Every manifest under deploy/kubernetes/ validates against the published schemas (core
objects: kubernetes-validate, strict; prometheus-operator objects: the vendored CRDs, strict),
and the validation refuses the mistakes it is there to catch."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from tests.monitor.kubernetes.schemas import REPO, crd_errors, documents, validate

DEPLOY = REPO / "deploy" / "kubernetes"
# Not manifests: kustomize's own files, and what the ConfigMaps are made from.
NOT_MANIFESTS = {"kustomization.yaml"}
NOT_MANIFEST_DIRS = {"slos", "config"}


def manifest_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*.yaml") if p.name not in NOT_MANIFESTS
                  and not NOT_MANIFEST_DIRS & set(p.relative_to(DEPLOY).parts))


def by_kind(kind: str) -> dict[str, Any]:
    for path in manifest_files():
        for document in documents(path):
            if document["kind"] == kind:
                return document
    raise AssertionError(f"no {kind} under {DEPLOY}")


def test_every_engine_has_its_monitors_and_those_with_rules_a_rule_object() -> None:
    names = {p.name for p in manifest_files()}
    for engine in ("vllm", "sglang", "tgi", "llamacpp", "triton", "dcgm", "inferwatch"):
        assert {f"{engine}-podmonitor.yaml", f"{engine}-servicemonitor.yaml"} <= names
    for engine in ("vllm", "sglang", "tgi", "triton", "dcgm"):
        assert f"{engine}-rules.yaml" in names


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_manifest_validates(path: Path) -> None:
    manifests = list(documents(path))
    assert manifests
    for manifest in manifests:
        validate(manifest)


def test_a_snake_case_relabel_field_is_refused() -> None:
    monitor = copy.deepcopy(by_kind("PodMonitor"))
    relabel = monitor["spec"]["podMetricsEndpoints"][0]["metricRelabelings"][0]
    relabel["source_labels"] = relabel.pop("sourceLabels")
    [error] = crd_errors(monitor)
    assert "'source_labels' was unexpected" in error
    assert error.startswith("spec.podMetricsEndpoints.0.metricRelabelings.0")


@pytest.mark.parametrize(("change", "expected"), [
    (lambda m: m["spec"]["endpoints"][0]["metricRelabelings"][0].update(action="rename"),
     "'rename' is not one of"),
    (lambda m: m["spec"]["endpoints"][0].update(honorTimestamps="no"),
     "'no' is not of type 'boolean'"),
    (lambda m: m["metadata"].update(name="Inferwatch_vLLM"), "name 'Inferwatch_vLLM'"),
], ids=["unknown action", "string for a boolean", "bad object name"])
def test_a_bad_service_monitor_is_refused(change: Any, expected: str) -> None:
    monitor = copy.deepcopy(by_kind("ServiceMonitor"))
    assert crd_errors(monitor) == []
    change(monitor)
    assert any(expected in error for error in crd_errors(monitor))


def test_a_prometheus_rule_without_expr_is_refused() -> None:
    rule = copy.deepcopy(by_kind("PrometheusRule"))
    del rule["spec"]["groups"][0]["rules"][0]["expr"]
    assert any("'expr' is a required property" in e for e in crd_errors(rule))


def test_a_misspelt_deployment_field_is_refused() -> None:
    deployment = copy.deepcopy(by_kind("Deployment"))
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinessprobe"] = container.pop("readinessProbe")
    with pytest.raises(jsonschema.ValidationError, match="readinessprobe"):
        kubernetes_validate.validate(deployment, "1.25.0", strict=True)


def test_the_monitor_runs_two_replicas_ready_on_readyz_with_the_store_from_the_secret() -> None:
    deployment = by_kind("Deployment")
    assert deployment["spec"]["replicas"] == 2
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e}
    assert env["INFERWATCH_STORE_URL"] == {"name": "inferwatch", "key": "store-url"}
    assert env["INFERWATCH_API_TOKEN"] == {"name": "inferwatch", "key": "api-token"}
    assert "--store=$(INFERWATCH_STORE_URL)" in container["args"]
    secret = by_kind("Secret")
    assert set(secret["stringData"]) == {"store-url", "api-token"}
