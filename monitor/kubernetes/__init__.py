"""Kubernetes manifests for inferwatch: prometheus-operator objects (PrometheusRule,
PodMonitor, ServiceMonitor) from the same tables and SLO specs as deploy/prometheus/ and
alerts/, generated into deploy/kubernetes/ beside the monitor's kustomize base."""

from monitor.kubernetes.generate import DEFAULT_RELEASE, engine_files, generated_files
from monitor.kubernetes.objects import (
    ScrapeTarget,
    camel_relabelings,
    pod_monitor,
    prometheus_rule,
    service_monitor,
)

__all__ = [
    "DEFAULT_RELEASE",
    "ScrapeTarget",
    "camel_relabelings",
    "engine_files",
    "generated_files",
    "pod_monitor",
    "prometheus_rule",
    "service_monitor",
]
