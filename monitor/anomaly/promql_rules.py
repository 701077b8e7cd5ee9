"""Recording and alerting rules for the anomaly detectors PromQL can express, for Prometheus
or vmalert (``inferwatch rules anomaly``), from the detectors' own parameters (AnomalyParams)
and features (monitor.anomaly.features).

Two detectors: robust scores (value against the trailing median, in MADs scaled to a normal's
sigma, with the same floors) and throughput below its load-adjusted baseline (tokens per
offered request over a trailing window times the current offered load, capped at the
throughput's 95th percentile over the same window). Where the rules approximate the embedded
monitor, ``APPROXIMATIONS`` says how; what they cannot express is ``NOT_EXPRESSED``.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from monitor.anomaly.baseline import MAD_TO_SIGMA
from monitor.anomaly.detectors import Direction
from monitor.anomaly.features import OFFERED_LOAD
from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.promql_signals import (
    RECORD_PREFIX,
    Signal,
    scored_signals,
    throughput_signal,
)

Rule = dict[str, Any]

NOT_EXPRESSED: Final[tuple[tuple[str, str], ...]] = (
    ("load-aware baselines (latency, queue, KV usage, preemptions judged against the points "
     "seen at an offered load within +-25%)", "inside a range or subquery every expression is "
     "evaluated at the past step, so a past point cannot be selected by its distance to the "
     "current load"),
    ("anomalous points left out of the baselines (and relearned after 6 hours), and out of "
     "the seasonal trend correction and residual spread (`--seasonal`)", "the "
     "baseline would read its own alert's history (ALERTS, one evaluation late) and count "
     "skipped points in a row; PromQL has no state across evaluations"),
    ("per-series tail calibration (thresholds scaled by the 99% deviation over 14 days)",
     "a 14-day subquery at the evaluation step reads 20,160 points per series per evaluation"),
    ("spread (the MAD of the last 10 points around their own median)", "a subquery evaluates "
     "the median at each past step, not the window's current one"),
    ("multivariate (robust Mahalanobis distance, MinCovDet)", "no matrix operations in PromQL"),
    ("diagnosis (which signals moved together, the likely cause)", "a rule yields numbers, "
     "not the reasoning over them"),
)

APPROXIMATIONS: Final[tuple[str, ...]] = (
    "signals are 5-minute rates, not one step's difference",
    "the MAD is the median of each point's distance to the median of its own time (a "
    "rolling median), not to the window's current median",
    "the trailing windows include the current points (an incident becomes the baseline "
    "after about half the window, 1 hour, not after the monitor's 6 hours)",
    "`for: 5m` needs 5 breaching evaluations of 5, the monitor 4 of 5; an alert resolves at "
    "the first evaluation under the threshold, without the monitor's clearing margin",
)


def _minutes(params: AnomalyParams, points: int) -> str:
    """``points`` steps as a PromQL duration, in hours when whole (2h reads better than 120m)."""
    minutes = round(points * params.step_seconds / 60)
    return f"{minutes // 60}h" if minutes and minutes % 60 == 0 else f"{minutes}m"


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def score_rules(signal: Signal, params: AnomalyParams) -> list[Rule]:
    """The signal, its trailing median and MAD, its spread with floors, its robust score."""
    r, window = signal.record, _minutes(params, params.trailing_points)
    step = _minutes(params, 1)
    median, mad, scale = f"{r}:median{window}", f"{r}:mad{window}", f"{r}:scale{window}"
    relative = f"{params.relative_scale_floor!r} * abs({median})"
    distance = f"{r} - {median}" if signal.feature.direction is Direction.UP else f"{median} - {r}"
    return [
        {"record": r, "expr": signal.expr},
        {"record": median, "expr": f"quantile_over_time(0.5, {r}[{window}])"},
        {"record": mad,
         "expr": f"quantile_over_time(0.5, abs({r} - {median})[{window}:{step}])"},
        {"record": scale,
         "expr": f"clamp_min({MAD_TO_SIGMA!r} * {mad}, {signal.feature.absolute_floor!r}) >= "
                 f"{relative} or {relative}"},
        {"record": f"{r}:robust_z",
         "expr": f"({distance}) / {scale} and count_over_time({r}[{window}]) >= "
                 f"{params.min_points}"},
    ]


def throughput_rules(params: AnomalyParams) -> list[Rule]:
    """Tokens per offered request over a trailing window x the current offered load, capped
    at the throughput's ``capacity_quantile`` over that window; the ratio to it."""
    t = throughput_signal()
    r, offered = t.record, RECORD_PREFIX + OFFERED_LOAD
    window = _minutes(params, params.efficiency_trailing_points)
    per_request = f"{RECORD_PREFIX}tokens_per_request"
    expected = f"{per_request}:median{window} * {offered}"
    capacity = f"{r}:capacity{window}"
    return [
        {"record": r, "expr": t.expr},
        {"record": per_request, "expr": f"{r} / ({offered} > 0)"},
        {"record": f"{per_request}:median{window}",
         "expr": f"quantile_over_time(0.5, {per_request}[{window}]) and "
                 f"count_over_time({per_request}[{window}]) >= {params.min_points}"},
        {"record": capacity,
         "expr": f"quantile_over_time({params.capacity_quantile!r}, {r}[{window}])"},
        {"record": f"{r}:baseline", "expr": f"{expected} <= {capacity} or {capacity}"},
        {"record": f"{r}:baseline_ratio", "expr": f"{r} / ({r}:baseline > 0)"},
    ]


def alert_rules(params: AnomalyParams, page_on: frozenset[str] = frozenset()) -> list[Rule]:
    """Every anomaly is a ticket (severity warning); an operator turns paging on per metric
    (``page_on``: its alerts become severity critical; tokens/s only at the critical level),
    as the embedded monitor's ``anomaly.page_on`` does."""
    hold = _minutes(params, params.for_points)
    rules: list[Rule] = []
    ratio = f"{throughput_signal().record}:baseline_ratio"
    pages_throughput = throughput_signal().feature.name in page_on
    for level, severity, threshold in (
            ("warning", "warning", params.ratio_warning),
            ("critical", "critical" if pages_throughput else "warning", params.ratio_critical)):
        rules.append(_alert("InferwatchThroughputBelowBaseline", f"{ratio} < {threshold!r}",
                            hold, severity,
                            f"{{{{ $labels.instance }}}}: tokens/s at {{{{ $value | "
                            f"humanizePercentage }}}} of its load-adjusted baseline "
                            f"(threshold {threshold:.0%})", {"level": level}))
    for signal in scored_signals():
        name, z = _camel(signal.feature.name), f"{signal.record}:robust_z"
        severity = "critical" if signal.feature.name in page_on else "warning"
        # Where the seasonal file (--seasonal) scores the signal, its score replaces this one.
        defer = f" unless {signal.record}:seasonal_z"
        rules.append(_alert(f"InferwatchAnomaly{name}", f"{z} > {params.z_alert!r}{defer}", hold,
                            severity, f"{{{{ $labels.instance }}}}: {signal.feature.name} "
                            f"{{{{ $value | printf \"%.1f\" }}}} robust sigmas from its "
                            f"trailing median"))
        spike = _minutes(params, signal.feature.extreme_points - 1)
        rules.append(_alert(f"InferwatchAnomaly{name}Spike", f"{z} > {params.z_extreme!r}{defer}",
                            spike, severity, f"{{{{ $labels.instance }}}}: "
                            f"{signal.feature.name} spiked ({{{{ $value | printf \"%.1f\" }}}} "
                            f"robust sigmas)"))
    return rules


def _alert(name: str, expr: str, hold: str, severity: str, summary: str,
           extra: dict[str, str] | None = None) -> Rule:
    rule: Rule = {"alert": name, "expr": expr}
    if hold != "0m":
        rule["for"] = hold
    rule["labels"] = {"severity": severity, "detector": "inferwatch-anomaly", **(extra or {})}
    rule["annotations"] = {"summary": summary}
    return rule


def rule_groups(params: AnomalyParams, page_on: frozenset[str] = frozenset()
                ) -> list[dict[str, Any]]:
    interval = _minutes(params, 1)
    records = [rule for signal in scored_signals() for rule in score_rules(signal, params)]
    records += throughput_rules(params)  # after the offered load it divides by
    return [{"name": "inferwatch-anomaly-signals", "interval": interval, "rules": records},
            {"name": "inferwatch-anomaly-alerts", "interval": interval,
             "rules": alert_rules(params, page_on)}]


def generate_anomaly_rules(params: AnomalyParams | None = None,
                           page_on: frozenset[str] = frozenset()) -> str:
    """The rule file: a header saying what it approximates and what it leaves out, the groups."""
    params = params or AnomalyParams()
    header = ["# Generated by `inferwatch rules anomaly` from monitor/anomaly (params.py, "
              "features.py). Do not edit; regenerate.",
              "# Robust scores and throughput against its load-adjusted baseline. "
              "Approximations of the embedded monitor:"]
    header += [f"#   - {text}" for text in APPROXIMATIONS]
    header.append("# Seasonal baselines (the same time 1, 2 and 3 weeks or days ago, "
                  "trend-corrected) are opt-in: `inferwatch rules anomaly --seasonal weekly` "
                  "writes inferwatch-anomaly-seasonal-rules.yml; where its score "
                  "(inferwatch_target:<signal>:seasonal_z) exists, the robust-score alerts "
                  "below defer to it.")
    header.append("# Not expressed in PromQL (the embedded monitor, `inferwatch serve`, has them):")
    header += [f"#   - {what}: {why}" for what, why in NOT_EXPRESSED]
    header.append("# Anomalies are tickets (severity warning); pages come from SLO burn rates. "
                  + (f"Paging turned on for: {', '.join(sorted(page_on))}."
                     if page_on else "Turn paging on per metric with --page-on."))
    body: str = yaml.safe_dump({"groups": rule_groups(params, page_on)}, sort_keys=False,
                               default_flow_style=False, allow_unicode=True, width=1_000_000)
    return "\n".join(header) + "\n" + body
