"""The seasonal variant of the anomaly rules (``inferwatch rules anomaly --seasonal weekly``):
each robustly scored signal against what it read at the same time 1, 2 and 3 seasons ago (a
week, or a day with ``daily``), as the embedded monitor's seasonal baseline
(monitor.anomaly.baseline) does, so a weekly traffic pattern is the expectation, not an anomaly.

Per signal ``r`` (recorded by the base rule file, ``inferwatch-anomaly-rules.yml``) and season
``1w``: ``r:season_level1w`` the median of the 30 minutes around the same time of each past
season (a ``season`` label 1..3), ``r:seasonal_raw1w`` their median (all three present),
``r:seasonal_actual1w`` the signal where there is a prediction, ``r:seasonal_trend1w`` the
last day's median of that over the raw prediction's (clamped to 0.5..2, as the monitor's
trend correction), ``r:seasonal_expected1w`` the corrected prediction,
``r:seasonal_residual1w`` the absolute residual, ``r:seasonal_scale1w`` 1.4826x the last
day's median residual with the monitor's floors (nothing is scored before
``min_seasonal_points`` residuals), ``r:seasonal_z`` the score in the bad direction.
"""

from __future__ import annotations

from typing import Any, Final

import yaml

from monitor.anomaly.baseline import MAD_TO_SIGMA
from monitor.anomaly.detectors import Direction
from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.promql_rules import Rule, _alert, _camel, _minutes
from monitor.anomaly.promql_signals import Signal, scored_signals

SEASONS: Final = {"weekly": 7 * 86_400, "daily": 86_400}
TREND_MIN, TREND_MAX = 0.5, 2.0  # as monitor.anomaly.baseline clamps its trend correction
DETECTOR: Final = "inferwatch-anomaly-seasonal"

SEASONAL_APPROXIMATIONS: Final[tuple[str, ...]] = (
    "the residual spread is the day's median absolute residual (around 0, not around the "
    "residuals' own median), each residual taken with the trend of its own time",
    "every point stays in the seasonal history and in the day of residuals, anomalies "
    "included (the monitor leaves anomalous points out of the trend correction)",
    "needs the signals of the base file kept for 3 seasons and 30 minutes (3 weeks for "
    "weekly: raise the retention of Prometheus, e.g. kube-prometheus-stack's 10d default)",
)


def _duration(seconds: int) -> str:
    """Seconds as a PromQL duration in hours and minutes (``167h45m``): both Prometheus and
    MetricsQL read the compound form."""
    hours, minutes = divmod(seconds // 60, 60)
    return (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes or not hours else "")


def seasonal_score(signal: Signal) -> str:
    """The seasonal score's name, without the season: the base file's robust-score alerts
    defer to it (``unless``) wherever it exists, as the monitor prefers its seasonal baseline
    to the trailing one once there is history. Load one seasonal file, weekly or daily."""
    return f"{signal.record}:seasonal_z"


def season_tag(season: str) -> str:
    if season not in SEASONS:
        raise ValueError(f"--seasonal {season!r}: give one of {', '.join(SEASONS)}")
    return "1w" if season == "weekly" else "1d"


def _levels(r: str, season: str, params: AnomalyParams) -> str:
    """The median of the window around the same time of each past season, one ``season``
    label value each (``label_replace`` copies joined by ``or``)."""
    period, step = SEASONS[season], round(params.step_seconds)
    half = params.season_halfwidth_points * step
    window = _duration(2 * half)
    copies = [f'label_replace(quantile_over_time(0.5, {r}[{window}] offset '
              f'{_duration(lag * period - half)}), "season", "{lag}", "", "")'
              for lag in range(1, params.season_lags + 1)]
    return " or ".join(copies)


def seasonal_rules(signal: Signal, season: str, params: AnomalyParams) -> list[Rule]:
    r, s = signal.record, season_tag(season)
    day = _duration(max(round(params.trend_points * params.step_seconds), 60))
    levels, raw, trend = f"{r}:season_level{s}", f"{r}:seasonal_raw{s}", f"{r}:seasonal_trend{s}"
    expected, residual = f"{r}:seasonal_expected{s}", f"{r}:seasonal_residual{s}"
    scale = f"{r}:seasonal_scale{s}"
    relative = f"{params.relative_scale_floor!r} * abs({expected})"
    distance = (f"{r} - {expected}" if signal.feature.direction is Direction.UP
                else f"{expected} - {r}")
    actual = f"{r}:seasonal_actual{s}"
    ratio = (f"quantile_over_time(0.5, {actual}[{day}]) / "
             f"(quantile_over_time(0.5, {raw}[{day}]) > 0)")
    return [
        {"record": levels, "expr": _levels(r, season, params)},
        {"record": raw, "expr": f"quantile without (season) (0.5, {levels}) and count without "
                                f"(season) ({levels}) >= {params.season_lags}"},
        {"record": actual, "expr": f"{r} and {raw}"},  # the trend compares the same times
        {"record": trend, "expr": f"clamp_max(clamp_min({ratio}, {TREND_MIN!r}), "
                                  f"{TREND_MAX!r}) or {raw} * 0 + 1"},
        {"record": expected, "expr": f"{trend} * {raw}"},
        {"record": residual, "expr": f"abs({r} - {expected})"},
        {"record": scale,
         "expr": f"(clamp_min({MAD_TO_SIGMA!r} * quantile_over_time(0.5, {residual}[{day}]), "
                 f"{signal.feature.absolute_floor!r}) >= {relative} or {relative}) and "
                 f"count_over_time({residual}[{day}]) >= {params.min_seasonal_points}"},
        {"record": seasonal_score(signal), "expr": f"({distance}) / {scale}"},
    ]


def seasonal_alert_rules(season: str, params: AnomalyParams) -> list[Rule]:
    hold = _minutes(params, params.for_points)
    unit = "weeks" if season == "weekly" else "days"
    rules: list[Rule] = []
    for signal in scored_signals():
        rule = _alert(f"InferwatchSeasonal{_camel(signal.feature.name)}",
                      f"{seasonal_score(signal)} > {params.z_alert!r}", hold, "warning",
                      f"{{{{ $labels.instance }}}}: {signal.feature.name} {{{{ $value | printf "
                      f"\"%.1f\" }}}} robust sigmas from the same time 1, 2 and 3 {unit} ago")
        rule["labels"]["detector"] = DETECTOR
        rules.append(rule)
    return rules


def seasonal_rule_groups(season: str, params: AnomalyParams) -> list[dict[str, Any]]:
    interval, name = _minutes(params, 1), f"inferwatch-anomaly-seasonal-{season}"
    records = [rule for signal in scored_signals()
               for rule in seasonal_rules(signal, season, params)]
    return [{"name": f"{name}-signals", "interval": interval, "rules": records},
            {"name": f"{name}-alerts", "interval": interval,
             "rules": seasonal_alert_rules(season, params)}]


def generate_seasonal_rules(season: str = "weekly", params: AnomalyParams | None = None) -> str:
    """The seasonal rule file: a header (what it reads, how it approximates), the groups."""
    params = params or AnomalyParams()
    unit = "week" if season == "weekly" else "day"
    header = [f"# Generated by `inferwatch rules anomaly --seasonal {season}` from "
              "monitor/anomaly (params.py, features.py). Do not edit; regenerate.",
              f"# Opt-in: each robustly scored signal against the same time 1, 2 and 3 {unit}s "
              "ago (the median of the 30 minutes around each), trend-corrected over the last "
              "day; `InferwatchSeasonal<Metric>` when the score is past "
              f"{params.z_alert:g} for {_minutes(params, params.for_points)}.",
              "# Load it beside inferwatch-anomaly-rules.yml (it reads that file's "
              "inferwatch_target:* signals). Approximations of the embedded monitor:"]
    header += [f"#   - {text}" for text in SEASONAL_APPROXIMATIONS]
    body: str = yaml.safe_dump({"groups": seasonal_rule_groups(season, params)}, sort_keys=False,
                               default_flow_style=False, allow_unicode=True, width=1_000_000)
    return "\n".join(header) + "\n" + body
