"""PromQL of the dashboard panels: one function per form of panels.yaml.

Metric names come from exporters/schema.py (``exposed_name``, plus ``_bucket``/``_sum``/
``_count`` for histograms), recorded series and alert names from monitor/slo (the rules'
own name functions), so a renamed metric or rule changes the dashboards on regeneration.
Every selector filters on the dashboard variables its series can carry: job and instance
always (Prometheus adds them), model where the schema gives the metric that label.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from exporters import schema
from exporters.schema import MetricSpec
from monitor.dashboards.spec import TargetSpec, metric_spec
from monitor.headroom.metrics import HEADROOM_METRIC
from monitor.slo.rules import (
    budget_remaining_record,
    escape_label_value,
    exhaustion_promql,
    slo_matcher,
)
from monitor.slo.spec import PRE_ENGINE_ERRORS, Slo

RATE_WINDOW: Final = "$__rate_interval"
STEP: Final = "$__interval"  # subquery resolution: the panel's own
RANGE: Final = "$__range"
PRICE_VARIABLE: Final = "gpu_hour_price"
GPUS_VARIABLE: Final = "gpus_per_replica"
SLO_FILTER: Final = 'slo=~"$slo"'
SECONDS_PER_HOUR: Final = 3600


@dataclass(frozen=True, slots=True)
class Query:
    """One Grafana target: its PromQL and legend."""

    expr: str
    legend: str


def selector(spec: MetricSpec, suffix: str = "", extra: Sequence[str] = ()) -> str:
    """``name{job=~"$job",model=~"$model",instance=~"$instance",...}``."""
    matchers = ['job=~"$job"']
    if schema.MODEL in spec.labels:
        matchers.append('model=~"$model"')
    matchers.append('instance=~"$instance"')
    return f"{spec.exposed_name}{suffix}{{{','.join([*matchers, *extra])}}}"


def _by(labels: Sequence[str]) -> str:
    return f" by ({', '.join(labels)})" if labels else ""


def _rate(spec: MetricSpec, by: Sequence[str], suffix: str = "",
          extra: Sequence[str] = ()) -> str:
    return f"sum{_by(by)} (rate({selector(spec, suffix, extra)}[{RATE_WINDOW}]))"


def _specs(target: TargetSpec) -> tuple[MetricSpec, MetricSpec | None]:
    assert target.metric is not None  # validated: every non-SLO form has a metric
    return metric_spec(target.metric), metric_spec(target.over) if target.over else None


def quantile_legend(legend: str, q: float) -> str:
    return f"{legend} p{q * 100:g}".strip()


def engine_queries(target: TargetSpec) -> list[Query]:
    """The queries of a target over the metric schema (one per quantile for quantiles)."""
    spec, over = _specs(target)
    by = target.by
    if target.form == "quantiles":
        grouped = ("le", *by)
        inner = f"sum{_by(grouped)} (rate({selector(spec, '_bucket')}[{RATE_WINDOW}]))"
        return [Query(f"histogram_quantile({q:g}, {inner})", quantile_legend(target.legend, q))
                for q in target.quantiles]
    expr = _ENGINE_FORMS[target.form](target, spec, over)
    if target.otherwise is not None:
        expr = f"{expr} or {_single(target.otherwise)}"
    return [Query(expr, target.legend)]


def _single(target: TargetSpec) -> str:
    (query,) = engine_queries(target)
    return query.expr


def _rate_form(t: TargetSpec, spec: MetricSpec, _: MetricSpec | None) -> str:
    return _rate(spec, t.by)


def _rate_trend(t: TargetSpec, spec: MetricSpec, _: MetricSpec | None) -> str:
    return f"avg_over_time(({_rate(spec, t.by)})[{t.window}:{STEP}])"


def _rate_baseline(t: TargetSpec, spec: MetricSpec, _: MetricSpec | None) -> str:
    return f"quantile_over_time(0.5, ({_rate(spec, t.by)})[{t.window}:{STEP}])"


def _mean(t: TargetSpec, spec: MetricSpec, _: MetricSpec | None) -> str:
    return f"{_rate(spec, t.by, '_sum')} / {_rate(spec, t.by, '_count')}"


def _mean_over(t: TargetSpec, spec: MetricSpec, over: MetricSpec | None) -> str:
    # A histogram's mean observation over a limit of one observation (tokens per step over
    # the step's token budget): the limit aggregated with `agg` (avg: one step's limit).
    assert over is not None
    return f"({_mean(t, spec, None)}) / {t.agg}{_by(t.by)} ({selector(over)})"


def _heatmap(t: TargetSpec, spec: MetricSpec, _: MetricSpec | None) -> str:
    # increase per interval, not rate: the heatmap's cells then count observations.
    return f"sum by (le) (increase({selector(spec, '_bucket')}[{RATE_WINDOW}]))"


def _gauge(t: TargetSpec, spec: MetricSpec, _: MetricSpec | None) -> str:
    return f"{t.agg}{_by(t.by)} ({selector(spec)})"


def _ratio(t: TargetSpec, spec: MetricSpec, over: MetricSpec | None) -> str:
    assert over is not None
    return f"{t.agg}{_by(t.by)} ({selector(spec)}) / {t.agg}{_by(t.by)} ({selector(over)})"


def _count(t: TargetSpec, spec: MetricSpec, _: MetricSpec | None) -> str:
    return f"count{_by(t.by)} ({selector(spec)})"


def _count_changes(t: TargetSpec, spec: MetricSpec, _: MetricSpec | None) -> str:
    # A subquery, since changes() takes a range of a series and the count is computed.
    return f"changes(({_count(t, spec, None)})[{RANGE}:{STEP}])"


def _per_replica(t: TargetSpec, spec: MetricSpec, over: MetricSpec | None) -> str:
    assert over is not None
    return f"{_rate(spec, t.by)} / count{_by(t.by)} ({selector(over)})"


def _cost(t: TargetSpec, spec: MetricSpec, over: MetricSpec | None) -> str:
    # $ per hour of the replicas over tokens per hour, per million; `> 0` leaves idle models
    # without a value instead of an infinite cost.
    assert over is not None
    replicas = f"count{_by(t.by)} ({selector(over)})"
    return (f"${PRICE_VARIABLE} * ${GPUS_VARIABLE} * {replicas} / "
            f"({_rate(spec, t.by)} * {SECONDS_PER_HOUR} > 0) * 1e6")


def _error_ratio(t: TargetSpec, spec: MetricSpec, over: MetricSpec | None) -> str:
    # The requests counter leaves out requests refused before the engine; the errors counter
    # has them (rejected, bad_request): the total adds them back, as the availability SLI does.
    assert over is not None
    refused = f'{schema.ERROR_TYPE}=~"{"|".join(sorted(PRE_ENGINE_ERRORS))}"'
    total = f"{_rate(over, t.by)} + {_rate(spec, t.by, extra=[refused])}"
    return f"{_rate(spec, t.by)} / ({total} > 0)"


_ENGINE_FORMS: Final[dict[str, Callable[[TargetSpec, MetricSpec, MetricSpec | None], str]]] = {
    "rate": _rate_form, "rate_trend": _rate_trend, "rate_baseline": _rate_baseline,
    "mean": _mean, "mean_over": _mean_over, "heatmap": _heatmap, "gauge": _gauge,
    "ratio": _ratio, "count": _count, "count_changes": _count_changes, "per_replica": _per_replica,
    "cost_per_million_tokens": _cost, "error_ratio": _error_ratio,
}


# --- SLO forms: the recording rules of monitor/slo/rules.py -----------------------------------

def with_slo_filter(expr: str, slo: Slo) -> str:
    """``expr`` (a rule's PromQL on one SLO's records) also filtered on the $slo variable."""
    own = slo_matcher(slo)
    return expr.replace(own, f'{own[:-1]},{SLO_FILTER}}}')


def budget_records(slos: Sequence[Slo]) -> list[str]:
    """The distinct budget-remaining record names (one per SLO period)."""
    return sorted({budget_remaining_record(slo) for slo in slos})


def any_budget_record(slos: Sequence[Slo]) -> str:
    """A selector of every budget-remaining series of the SLOs shown, by the $slo variable."""
    return " or ".join(f"{name}{{{SLO_FILTER}}}" for name in budget_records(slos))


def alerts_selector(extra: str = "") -> str:
    """The SLOs' alerts, whatever a spec's author named them: every alert has an slo label."""
    return f'ALERTS{{slo!="",{SLO_FILTER}{extra}}}'


def slo_queries(target: TargetSpec, slos: Sequence[Slo]) -> list[Query]:
    if not slos:
        return []
    if target.form == "slo_budget_remaining":
        return [Query(any_budget_record(slos), target.legend)]
    if target.form == "slo_exhaustion_hours":
        exprs = [with_slo_filter(e, s) for s in slos if (e := exhaustion_promql(s)) is not None]
        return [Query(" or ".join(f"({e})" for e in exprs), target.legend)] if exprs else []
    if target.form == "slo_alert_state":
        # 2 firing, 1 pending, else 0 for every SLO that has a budget series, so a healthy
        # SLO shows "ok" rather than no data.
        firing = "2 * " + alerts_selector(',alertstate="firing"')
        pending = alerts_selector(',alertstate="pending"')
        ok = f"0 * group by (slo) ({any_budget_record(slos)})"
        return [Query(f"max by (slo) ({firing} or {pending}) or {ok}", target.legend)]
    assert target.form == "slo_alerts"
    return [Query(alerts_selector(), target.legend)]


def slo_label(slo: Slo) -> str:
    return f'slo="{escape_label_value(slo.name)}",{SLO_FILTER}'


# --- the monitor's own series: capacity headroom (monitor/headroom/metrics.py) ---------------

def capacity_queries(target: TargetSpec) -> list[Query]:
    """``AGG by (BY) (inferwatch_target_capacity_headroom_ratio)``: by target, the least over
    the dimensions is the target's headroom."""
    return [Query(f"{target.agg}{_by(target.by)} ({HEADROOM_METRIC})", target.legend)]
