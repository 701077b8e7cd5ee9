"""Validation of Kubernetes manifests against published schemas: core objects with
kubernetes-validate (strict: unknown fields refused), prometheus-operator objects with the
vendored CRDs' openAPIV3Schema (tests/fixtures/kubernetes/README.md), made strict likewise."""

from __future__ import annotations

import functools
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import jsonschema
import kubernetes_validate
import yaml

from tests.integration import unavailable

REPO: Final = Path(__file__).resolve().parents[3]
CRD_DIR: Final = REPO / "tests" / "fixtures" / "kubernetes"
CRD_FILES: Final = {"PrometheusRule": "monitoring.coreos.com_prometheusrules.yaml",
                    "PodMonitor": "monitoring.coreos.com_podmonitors.yaml",
                    "ServiceMonitor": "monitoring.coreos.com_servicemonitors.yaml"}
# The oldest and the newest Kubernetes that kubernetes-validate has schemas for.
KUBERNETES_VERSIONS: Final = ("1.25.0", kubernetes_validate.utils.latest_version())
# RFC 1123 subdomain (object names) and label values, as the API server checks them.
NAME: Final = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
LABEL_VALUE: Final = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?")


def strict(schema: Any) -> Any:
    """The schema with ``additionalProperties: false`` wherever it lists properties and does
    not preserve unknown fields (there the API server would prune an unknown field)."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    copy = {key: strict(value) for key, value in schema.items()}
    if ("properties" in copy and "additionalProperties" not in copy
            and not copy.get("x-kubernetes-preserve-unknown-fields")):
        copy["additionalProperties"] = False
    return copy


@functools.cache
def crd_validator(kind: str) -> jsonschema.protocols.Validator:
    crd = yaml.safe_load((CRD_DIR / CRD_FILES[kind]).read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    schema = strict(version["schema"]["openAPIV3Schema"])
    validator: jsonschema.protocols.Validator = jsonschema.Draft7Validator(schema)
    return validator


def crd_errors(manifest: dict[str, Any]) -> list[str]:
    """What the CRD's schema refuses in ``manifest`` (and a bad name or label value)."""
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
              for e in crd_validator(manifest["kind"]).iter_errors(manifest)]
    return errors + metadata_errors(manifest)


def metadata_errors(manifest: dict[str, Any]) -> list[str]:
    # The CRD schemas leave metadata to the API server's ObjectMeta checks: the usual ones.
    metadata = manifest.get("metadata", {})
    errors = [] if NAME.fullmatch(metadata.get("name", "")) else [f"name {metadata.get('name')!r}"]
    return errors + [f"label {k}={v!r}" for k, v in metadata.get("labels", {}).items()
                     if not (isinstance(v, str) and LABEL_VALUE.fullmatch(v))]


def validate(manifest: dict[str, Any]) -> None:
    """Raise if ``manifest`` does not validate (CRD kinds by their CRD, others as core)."""
    if manifest["kind"] in CRD_FILES:
        assert manifest["apiVersion"] == "monitoring.coreos.com/v1"
        errors = crd_errors(manifest)
        assert not errors, f"{manifest['kind']} {manifest['metadata']['name']}: {errors[:5]}"
        return
    for version in KUBERNETES_VERSIONS:
        kubernetes_validate.validate(manifest, version, strict=True)


def documents(path: Path) -> Iterator[dict[str, Any]]:
    for document in yaml.safe_load_all(path.read_text()):
        if document is not None:
            yield document


def kubectl() -> str:
    path = shutil.which("kubectl")
    if path is None:
        unavailable("kubectl is not installed (apt-get install kubernetes-client)")
    return path
