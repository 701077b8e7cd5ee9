"""The target-down alert as a Prometheus rule, in a group of its own in the generated rule
file: the embedded monitor's ``InferwatchTargetDown`` (monitor/alerting/target_down.py),

    - alert: InferwatchTargetDown
      expr: up{job=~"vllm|sglang"} == 0      # up == 0 when no targets are named
      for: 5m
      labels: {severity: ticket, target: '{{ $labels.job }}'}

with the same ``for``, severity and links (``alerting.target_down`` of inferwatch.yaml, read by
``inferwatch rules generate --config``). Prometheus' ``up`` is 0 for a scrape that failed, as
a DOWN snapshot is for the monitor's collector. ``target`` is the value of the target label
(``job`` unless ``--target-label`` says otherwise): the label an SLO's ``selector.target``
matches, so a target has one name in both paths; the alert keeps ``up``'s own ``job`` and
``instance`` too, one alert per instance of a job. Prometheus does not expose a scrape's error
to rules: the summary says how long, and its /targets page says why.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Final

from monitor.collect.target_down_config import TARGET_DOWN_ALERT, TargetDownConfig
from monitor.slo.durations import format_duration
from monitor.slo.rules import SeriesSelector, dump_yaml

GROUP: Final = "inferwatch-target-down"
# The monitor's default evaluation_interval_seconds: both paths look as often.
DEFAULT_INTERVAL_SECONDS: Final = 15.0


@dataclass(frozen=True, slots=True)
class TargetDownRule:
    """What the generated rule watches and how: ``targets`` are values of the target label
    (none: every ``up`` series the Prometheus has)."""

    settings: TargetDownConfig = field(default_factory=TargetDownConfig)
    targets: tuple[str, ...] = ()
    interval_seconds: float = DEFAULT_INTERVAL_SECONDS

    def __post_init__(self) -> None:
        if not self.interval_seconds > 0:
            raise ValueError(f"target-down interval must be positive, got "
                             f"{self.interval_seconds}")


def for_text(settings: TargetDownConfig) -> str:
    return format_duration(settings.for_seconds) if settings.for_seconds > 0 else "0s"


def up_selector(rule: TargetDownRule, target_label: str) -> SeriesSelector:
    one_of = ((target_label, tuple(sorted(set(rule.targets)))),) if rule.targets else ()
    return SeriesSelector("up", one_of=one_of)


def rule_annotations(settings: TargetDownConfig, target: str, instance: str) -> dict[str, str]:
    """The rule's annotations with ``target`` and ``instance`` as given: templates of the
    alert's labels in the rule, their values in a test's expectations."""
    held = for_text(settings)
    return {
        "summary": f"Target {target} ({instance}) is down: every scrape failed for {held}",
        "description": (f"Prometheus' scrapes of {instance} (target {target}) have all failed "
                        f"for {held}; its /targets page has the error. While it is down its "
                        "requests are missing from every SLO it counts in."),
        **settings.links(target),
    }


def target_down_rule(rule: TargetDownRule, target_label: str = "job") -> dict[str, Any]:
    settings = rule.settings
    out: dict[str, Any] = {"alert": TARGET_DOWN_ALERT,
                           "expr": f"{up_selector(rule, target_label).promql()} == 0"}
    if settings.for_seconds > 0:
        out["for"] = for_text(settings)
    target = "{{ $labels." + target_label + " }}"
    out["labels"] = {"severity": settings.severity, "target": target}
    out["annotations"] = rule_annotations(settings, target, "{{ $labels.instance }}")
    return out


def target_down_lines(rule: TargetDownRule, target_label: str = "job") -> list[str]:
    """The group in the rule file, after a comment; nothing when the alert is disabled."""
    if not rule.settings.enabled:
        return []
    watched = (f"the targets {', '.join(sorted(set(rule.targets)))}" if rule.targets
               else "every scraped target")
    group = {"name": GROUP, "interval": format_duration(rule.interval_seconds),
             "rules": [target_down_rule(rule, target_label)]}
    return [f"# Target down ({watched}): up == 0 for {for_text(rule.settings)}, as the "
            "monitor's alerting.target_down; target = the "
            f'"{target_label}" label.', dump_yaml([group]).rstrip("\n")]


# --- `inferwatch rules generate` options ----------------------------------------------------

def add_arguments(gen: argparse.ArgumentParser) -> None:
    gen.add_argument("--config", default=None,
                     help="an inferwatch.yaml: each latency SLO is counted at the edges of "
                          "the engine its selected targets declare (engine: vllm, ...), and "
                          "the target-down rule takes its alerting.target_down (for, "
                          "severity, links, enabled) and evaluation interval (default: "
                          "their defaults)")
    gen.add_argument("--target-down-targets", default="",
                     help="comma-separated values of the target label the target-down rule "
                          "watches (default: every scraped target)")


def from_arguments(args: argparse.Namespace) -> TargetDownRule:
    """The rule of --config's alerting section and --target-down-targets; ConfigError for a
    bad config file."""
    from monitor.collect.config import load_config

    targets = tuple(t.strip() for t in args.target_down_targets.split(",") if t.strip())
    if args.config is None:
        return TargetDownRule(targets=targets)
    alerting = load_config(args.config).alerting
    return TargetDownRule(alerting.target_down, targets, alerting.evaluation_interval_seconds)
