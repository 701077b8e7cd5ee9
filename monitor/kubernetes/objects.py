"""prometheus-operator objects (monitoring.coreos.com/v1): PrometheusRule for rule groups, and
PodMonitor / ServiceMonitor scraping one engine with the generated metric relabelings.

The operator's CRDs spell relabel fields in camelCase (``sourceLabels``), and the API server
silently prunes a field its schema does not know, so a snake_case ``source_labels`` would be
dropped without an error: every key is translated here, and an unknown one is refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from exporters.promconfig.relabel import RelabelConfig

API_VERSION: Final = "monitoring.coreos.com/v1"
PART_OF: Final = {"app.kubernetes.io/part-of": "inferwatch"}
# Prometheus' relabel_config keys -> the CRD's RelabelConfig fields.
RELABEL_FIELDS: Final = {
    "source_labels": "sourceLabels", "separator": "separator", "target_label": "targetLabel",
    "regex": "regex", "modulus": "modulus", "replacement": "replacement", "action": "action"}

Manifest = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ScrapeTarget:
    """How the example monitors find an engine's pods or services: a label selector and the
    name of the port serving /metrics (users edit both to match their deployment)."""

    job: str
    selector: Mapping[str, str]
    port: str = "metrics"
    path: str = "/metrics"
    labels: Mapping[str, str] = field(default_factory=dict)  # on the monitor object


def camel_relabelings(configs: Sequence[RelabelConfig]) -> list[dict[str, Any]]:
    """Prometheus ``relabel_configs`` as the CRD's ``relabelings`` / ``metricRelabelings``."""
    converted = []
    for i, config in enumerate(configs):
        unknown = sorted(set(config) - set(RELABEL_FIELDS))
        if unknown:
            raise ValueError(f"relabel config [{i}]: no CRD field for {', '.join(unknown)}")
        converted.append({RELABEL_FIELDS[key]: value for key, value in config.items()})
    return converted


def prometheus_rule(name: str, groups: Sequence[Mapping[str, Any]],
                    labels: Mapping[str, str]) -> Manifest:
    return {"apiVersion": API_VERSION, "kind": "PrometheusRule",
            "metadata": _metadata(name, labels), "spec": {"groups": [dict(g) for g in groups]}}


def pod_monitor(name: str, target: ScrapeTarget,
                metric_relabelings: Sequence[RelabelConfig]) -> Manifest:
    return {"apiVersion": API_VERSION, "kind": "PodMonitor",
            "metadata": _metadata(name, target.labels),
            "spec": {"selector": {"matchLabels": dict(target.selector)},
                     "podMetricsEndpoints": [_endpoint(target, metric_relabelings)]}}


def service_monitor(name: str, target: ScrapeTarget,
                    metric_relabelings: Sequence[RelabelConfig]) -> Manifest:
    return {"apiVersion": API_VERSION, "kind": "ServiceMonitor",
            "metadata": _metadata(name, target.labels),
            "spec": {"selector": {"matchLabels": dict(target.selector)},
                     "endpoints": [_endpoint(target, metric_relabelings)]}}


def _endpoint(target: ScrapeTarget, metric_relabelings: Sequence[RelabelConfig]) -> Manifest:
    # job is set to the engine's name (the operator would write namespace/monitor-name or the
    # service's name): the SLO rules and the monitor's PromQL targets select by it, as in the
    # plain Prometheus configuration of deploy/prometheus/.
    job = {"action": "replace", "target_label": "job", "replacement": target.job}
    # honorTimestamps off: the bridge drops a page's timestamps too (as deploy/prometheus/).
    return {"port": target.port, "path": target.path, "honorTimestamps": False,
            "relabelings": camel_relabelings([job]),
            "metricRelabelings": camel_relabelings(metric_relabelings)}


def _metadata(name: str, labels: Mapping[str, str]) -> Manifest:
    return {"name": name, "labels": {**PART_OF, **labels}}
