"""The checked-in files of deploy/kubernetes/: per engine a PodMonitor and a ServiceMonitor
(pick one) carrying the scrape-config's metric relabelings and a PrometheusRule with its
recording rules; one PrometheusRule with the SLO rules; the SLO files the monitor's kustomize
base mounts (kustomize reads files only below its own directory, so they are copied there)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from exporters.adapters.table import load_tables
from exporters.promconfig.recording import rule_group
from exporters.promconfig.relabel import metric_relabel_configs
from exporters.promconfig.render import dump_yaml, engine_plan, gap_comment
from monitor.kubernetes.objects import (
    Manifest,
    ScrapeTarget,
    pod_monitor,
    prometheus_rule,
    service_monitor,
)
from monitor.slo.rules import generate_rules
from monitor.slo.spec import Slo
from monitor.slo.target_down_rules import TargetDownRule

# The label kube-prometheus-stack's Prometheus selects monitors and rules by (its Helm
# release name; the chart's default selectors match `release: <release name>`).
DEFAULT_RELEASE: Final = "kube-prometheus-stack"
ENGINES_DIR: Final = "engines"
SLO_RULES_FILE: Final = "kube-prometheus-stack/inferwatch-slo-rules.yaml"
ANOMALY_RULES_FILE: Final = "kube-prometheus-stack/inferwatch-anomaly-rules.yaml"
# Opt-in (not in the kustomization's resources): needs 3 weeks of retention.
SEASONAL_RULES_FILE: Final = "kube-prometheus-stack/inferwatch-anomaly-seasonal-rules.yaml"
MONITOR_SLOS_DIR: Final = "monitor/slos"
SLO_SUFFIXES: Final = (".yaml", ".yml")


def engine_files(engine: str, release: str) -> dict[str, str]:
    """``engine``'s PodMonitor, ServiceMonitor and (if it has recording rules) PrometheusRule,
    by path under the output."""
    plan = engine_plan(engine)
    labels = {"release": release}
    target = ScrapeTarget(job=engine, selector={"app.kubernetes.io/name": engine},
                          labels=labels)
    relabelings = metric_relabel_configs(plan)
    source = f"exporters/adapters/mappings/{engine}.yaml"
    gaps = gap_comment(plan.gaps)
    group = rule_group(plan)
    apply = (f"Apply the PrometheusRule {engine}-rules.yaml with it." if group["rules"]
             else "Relabeling does it all: this engine needs no recording rules.")
    select = ["# Scrapes the pods (or services) labelled app.kubernetes.io/name: "
              f"{engine} on the port named 'metrics':",
              f"# edit spec.selector and the endpoint's port to match your deployment. {apply}"]
    name = f"inferwatch-{engine}"
    files = {
        f"{ENGINES_DIR}/{engine}-podmonitor.yaml": _document(
            pod_monitor(name, target, relabelings), f"{source}: PodMonitor", select + gaps),
        f"{ENGINES_DIR}/{engine}-servicemonitor.yaml": _document(
            service_monitor(name, target, relabelings), f"{source}: ServiceMonitor",
            select + gaps),
    }
    if group["rules"]:
        files[f"{ENGINES_DIR}/{engine}-rules.yaml"] = _document(
            prometheus_rule(f"inferwatch-normalize-{engine}", [group], labels),
            f"{source}: recording rules", gaps)
    return files


def slo_rule_file(slos: Sequence[Slo], sources: Sequence[str], release: str, *,
                  interval_seconds: float = 60.0, target_label: str = "job") -> str:
    """The SLO rules of ``inferwatch rules generate`` as one PrometheusRule; its target-down
    rule watches the engines' jobs (the monitors set ``job`` to the engine's name), not every
    target of the cluster's Prometheus (kube-prometheus-stack has its own TargetDown)."""
    engines = TargetDownRule(targets=tuple(sorted(load_tables())))
    text = generate_rules(slos, interval_seconds=interval_seconds, target_label=target_label,
                          target_down=engines)
    groups: list[Mapping[str, Any]] = yaml.safe_load(text)["groups"]
    # The rule file's header after its first line (which names the other command).
    header = text[:text.index("\ngroups:")].splitlines()[1:]
    return _document(prometheus_rule("inferwatch-slo", groups, {"release": release}),
                     f"the SLO specs {', '.join(sources)}: SLO recording and alerting rules",
                     header)


def anomaly_rule_file(release: str) -> str:
    """The rules of ``inferwatch rules anomaly`` as one PrometheusRule."""
    from monitor.anomaly.promql_rules import generate_anomaly_rules

    text = generate_anomaly_rules()
    groups: list[Mapping[str, Any]] = yaml.safe_load(text)["groups"]
    header = text[:text.index("\ngroups:")].splitlines()[1:]
    return _document(prometheus_rule("inferwatch-anomaly", groups, {"release": release}),
                     "monitor/anomaly (params.py, features.py): anomaly recording and alerting "
                     "rules", header)


def seasonal_rule_file(release: str) -> str:
    """The rules of ``inferwatch rules anomaly --seasonal weekly`` as one PrometheusRule."""
    from monitor.anomaly.promql_seasonal import generate_seasonal_rules

    text = generate_seasonal_rules("weekly")
    groups: list[Mapping[str, Any]] = yaml.safe_load(text)["groups"]
    header = text[:text.index("\ngroups:")].splitlines()[1:]
    header.append("# Not in kustomization.yaml's resources: add it there once Prometheus keeps "
                  "3 weeks (prometheus.prometheusSpec.retention).")
    return _document(prometheus_rule("inferwatch-anomaly-seasonal", groups,
                                     {"release": release}),
                     "monitor/anomaly (params.py, features.py): seasonal anomaly recording and "
                     "alerting rules (weekly)", header)


def slo_copies(slo_paths: Sequence[Path]) -> dict[str, str]:
    """The SLO files the monitor's base mounts, byte for byte."""
    return {f"{MONITOR_SLOS_DIR}/{path.name}": path.read_text(encoding="utf-8")
            for path in slo_paths}


def slo_paths(slos: Path) -> list[Path]:
    """The SLO spec files of a file or a directory (as the SLO loader lists a directory)."""
    if slos.is_dir():
        return sorted(p for p in slos.iterdir() if p.suffix in SLO_SUFFIXES and p.is_file())
    return [slos]


def generated_files(slos: Sequence[Slo], slos_source: Path, *,
                    release: str = DEFAULT_RELEASE, interval_seconds: float = 60.0,
                    engines: Sequence[str] | None = None) -> dict[str, str]:
    files: dict[str, str] = {}
    for engine in engines or sorted(load_tables()):
        files.update(engine_files(engine, release))
    paths = slo_paths(slos_source)
    files[SLO_RULES_FILE] = slo_rule_file(slos, [p.name for p in paths], release,
                                          interval_seconds=interval_seconds)
    files[ANOMALY_RULES_FILE] = anomaly_rule_file(release)
    files[SEASONAL_RULES_FILE] = seasonal_rule_file(release)
    files.update(slo_copies(paths))
    return files


def _document(manifest: Manifest, what: str, comments: Sequence[str]) -> str:
    lines = [f"# Generated by `inferwatch kubernetes` from {what}.", "# Do not edit; regenerate.",
             *comments]
    return "\n".join(lines) + "\n" + dump_yaml(manifest)
