"""What the canary and sweep pages show: each run as the API gives it (the store's row through
monitor/api/convert.py run_out), its result document read into table rows and charts.

The documents are those the runs record: a sweep's ``SweepResult.to_json()`` and a canary's
``LiveComparison.to_json()`` or ``StoredComparison.to_json()``. A canary's document keeps the
judge's per-metric summaries (medians, means, shift and interval), not the samples, and a live
one the two runs' latency percentiles: the plots draw those.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from monitor.api.convert import run_out
from monitor.api.schemas import RunOut
from monitor.api.state import ServiceState
from monitor.store.runs import count_runs, get_run, list_runs
from monitor.ui import fmt, svg

LIST_LIMIT: Final = 200
LATENCY: Final = ("ttft", "tpot", "itl", "e2e")
SLO_LATENCY: Final = ("ttft", "tpot", "e2e")   # what a sweep's SLO may bound


@dataclass(frozen=True, slots=True)
class RunList:
    runs: list[RunOut]
    total: int


def run_list(state: ServiceState, kind: str) -> RunList:
    engine = state.store.engine
    return RunList([run_out(r) for r in list_runs(engine, kind, LIST_LIMIT)],
                   count_runs(engine, kind))


def run_of(state: ServiceState, kind: str, run_id: str) -> RunOut | None:
    """The run as GET /api/v1/{kind}s/{id} answers it; None where that is a 404."""
    row = get_run(state.store.engine, run_id)
    return run_out(row) if row is not None and row.kind == kind else None


def config_rows(config: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """The run's request, flattened to dotted keys (``workload.input_len``)."""
    rows: list[tuple[str, str]] = []
    for key, value in config.items():
        if isinstance(value, Mapping):
            rows.extend(config_rows(value, f"{prefix}{key}."))
        else:
            rows.append((f"{prefix}{key}", value if isinstance(value, str)
                         else fmt.DASH if value is None else json.dumps(value)))
    return rows


# --- canaries -------------------------------------------------------------------------


def canary_mode(config: Mapping[str, Any]) -> str:
    """``live`` or ``stored``: the API records ``mode``, ``inferwatch canary`` its subcommand."""
    mode = config.get("mode") or config.get("canary_command")
    return str(mode) if mode else "stored" if "baseline_target" in config else "live"


def compared(config: Mapping[str, Any]) -> str:
    """What the canary compared: the two targets, or the two endpoints."""
    if canary_mode(config) == "stored":
        return f"{config.get('baseline_target')} → {config.get('canary_target')}"
    return f"{config.get('baseline_url')} → {config.get('canary_url')}"


@dataclass(frozen=True, slots=True)
class Unit:
    """How a judged metric's values are written and plotted."""

    label: str
    scale: float
    text: Callable[[float | None], str]


def _with(suffix: str, digits: int) -> Callable[[float | None], str]:
    return lambda v: fmt.DASH if v is None else f"{fmt.number(v, digits)} {suffix}"


MILLIS: Final = Unit("ms", 1000.0, fmt.millis)
UNITS: Final[Mapping[str, Unit]] = {
    "output_tokens_per_second": Unit("tok/s", 1.0, _with("tok/s", 1)),
    "requests_per_second": Unit("req/s", 1.0, _with("req/s", 2)),
    "error_rate": Unit("%", 100.0, lambda v: fmt.percent(v, 2)),
}
PLAIN: Final = Unit("", 1.0, fmt.sig)


def unit_of(metric: str) -> Unit:
    """Per-request latencies and per-interval ``*_p99`` are seconds (shown in ms)."""
    if metric in LATENCY or (metric.endswith("_p99") and metric[:-4] in LATENCY):
        return MILLIS
    return UNITS.get(metric, PLAIN)


def effect_kind(result: Mapping[str, Any]) -> str | None:
    """``ratio`` (canary/baseline median) or ``absolute`` (the shift), read off the document:
    a ratio effect is (median_baseline + shift) / median_baseline; None without an effect."""
    effect, shift, base = result["effect"], result["shift"], result["median_baseline"]
    if shift is None:
        return None
    if effect is None:
        return "ratio"   # undefined: the baseline median is 0
    if shift == 0:
        return "ratio" if effect == 1.0 else "absolute"   # no change: 1x, or a shift of 0
    if base and math.isclose(effect, (base + shift) / base, rel_tol=1e-9, abs_tol=1e-12):
        return "ratio"
    return "absolute"


@dataclass(frozen=True, slots=True)
class MetricRow:
    result: dict[str, Any]          # the document's per-metric result, as the API gives it
    unit: Unit
    kind: str | None                # effect_kind

    @property
    def test(self) -> str:
        """How the metric was judged (the page's note spells the test out)."""
        if self.result["verdict"] == "nodata":
            return "no data"
        if self.result["p_value"] == 1.0 and self.result["shift"] == 0.0 \
                and self.result["ci_low"] == self.result["ci_high"] == 0.0:
            return "none: identical samples"
        return f"Mann-Whitney U; {self.kind or 'ratio'} effect"

    @property
    def test_short(self) -> str:
        return {"no data": "—", "none: identical samples": "identical"}.get(
            self.test, f"U test, {self.kind or 'ratio'}")

    def effect_text(self, value: float | None) -> str:
        if self.kind == "absolute":
            return self.unit.text(value)
        return fmt.DASH if value is None else f"{fmt.sig(value)}×"

    @property
    def effect(self) -> str:
        return self.effect_text(self.result["effect"])

    @property
    def effect_ci(self) -> str:
        low, high = self.result["effect_ci"]
        return f"[{self.effect_text(low)}, {self.effect_text(high)}]"

    @property
    def shift_ci(self) -> str:
        return f"[{self.unit.text(self.result['ci_low'])}, " \
               f"{self.unit.text(self.result['ci_high'])}]"


@dataclass
class CanaryView:
    run: RunOut
    mode: str
    judgement: dict[str, Any] | None = None
    reasons: list[str] = field(default_factory=list)
    metrics: list[MetricRow] = field(default_factory=list)
    metric_plots: dict[str, str] = field(default_factory=dict)
    distributions: dict[str, str] = field(default_factory=dict)   # live: latency percentiles
    summaries: list[tuple[str, str, str]] = field(default_factory=list)   # figure, base, can

    @property
    def tally(self) -> tuple[int, int]:
        """How many metrics passed, of those with data."""
        verdicts = [m.result["verdict"] for m in self.metrics]
        return verdicts.count("pass"), len(verdicts) - verdicts.count("nodata")


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale


def canary_view(run: RunOut) -> CanaryView:
    view = CanaryView(run, canary_mode(run.config))
    result = run.result
    if result is None or "judgement" not in result:
        return view
    judgement = view.judgement = result["judgement"]
    view.metrics = [MetricRow(r, unit_of(r["name"]), effect_kind(r))
                    for r in judgement["results"]]
    view.reasons = [f"critical failure: {name}" for name in judgement["critical_failures"]] \
        + [f"{r['name']}: {r['reason']}" for r in judgement["results"] if r["verdict"] != "pass"] \
        + [f"note: {note}" for note in judgement.get("notes", [])]
    for row in view.metrics:
        r, u = row.result, row.unit
        if r["verdict"] == "nodata":
            continue
        view.metric_plots[r["name"]] = svg.bars(
            [("median", [_scaled(r["median_baseline"], u.scale),
                         _scaled(r["median_canary"], u.scale)]),
             ("mean", [_scaled(r["mean_baseline"], u.scale),
                       _scaled(r["mean_canary"], u.scale)])],
            ["baseline", "canary"], f"{r['name']}: baseline and canary",
            u.label or "value")
    base, can = result.get("baseline"), result.get("canary")
    if isinstance(base, Mapping) and isinstance(can, Mapping):
        view.distributions = _distributions(base, can)
        view.summaries = _summaries(base, can)
    return view


def _distributions(base: Mapping[str, Any], can: Mapping[str, Any]) -> dict[str, str]:
    """Per latency metric of a live canary: each percentile and the mean, side by side."""
    plots = {}
    for metric in LATENCY:
        b, c = base["latency"].get(metric), can["latency"].get(metric)
        if b is None and c is None:
            continue
        keys = list((b or c)["percentiles"])
        groups = [(k, [_scaled((d or {}).get("percentiles", {}).get(k), 1000.0)
                       for d in (b, c)]) for k in keys]
        groups.append(("mean", [_scaled(d["mean"], 1000.0) if d else None for d in (b, c)]))
        plots[metric] = svg.bars(groups, ["baseline", "canary"],
                                 f"{metric} distribution: baseline and canary",
                                 f"{metric} (ms)", width=360)
    return plots


def _summaries(base: Mapping[str, Any], can: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, Callable[[Mapping[str, Any]], str]]] = [
        ("requests", lambda s: fmt.number(s["requests"], 0)),
        ("completed", lambda s: fmt.number(s["completed"], 0)),
        ("failed", lambda s: fmt.number(s["failed"], 0)),
        ("duration", lambda s: f"{fmt.number(s['duration_seconds'], 1)} s"),
        ("requests/s", lambda s: fmt.number(s["request_throughput"], 2)),
        ("output tokens/s", lambda s: fmt.number(s["output_throughput"], 1)),
    ]
    return [(name, text(base), text(can)) for name, text in rows]


# --- sweeps ---------------------------------------------------------------------------


def latency(point: Mapping[str, Any], metric: str, q: str) -> float | None:
    """A point's ``metric`` percentile ``q`` ("p99") in seconds, None when not measured."""
    dist = point["summary"]["latency"].get(metric)
    return None if dist is None else dist["percentiles"].get(q)


@dataclass
class SweepView:
    run: RunOut
    result: dict[str, Any] | None = None
    points: list[dict[str, Any]] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)       # latency metrics measured
    charts: dict[str, str] = field(default_factory=dict)   # chart id -> SVG


def markers(result: Mapping[str, Any]) -> list[svg.Rule]:
    """The max rate under the SLO, the knee and the saturation rate, where found."""
    found = []
    for key, kind, text in (("max_rate_under_slo", "capacity", "max under SLO"),
                            ("knee_rate", "knee", "knee"),
                            ("saturation_rate", "saturation", "saturation")):
        value = result.get(key)
        if value is not None:
            found.append(svg.Rule(value, f"{text} {fmt.number(value, 2)} req/s", kind))
    return found


def _millis_of(metric: str, q: str) -> Callable[[dict[str, Any]], float | None]:
    return lambda point: _scaled(latency(point, metric, q), 1000.0)


def sweep_view(run: RunOut) -> SweepView:
    view = SweepView(run)
    result = run.result
    if result is None or "points" not in result:
        return view
    view.result = result
    points = view.points = sorted(result["points"], key=lambda p: p["rate"])
    view.metrics = [m for m in SLO_LATENCY
                    if any(latency(p, m, "p50") is not None for p in points)]
    rules = markers(result)
    x_label = "offered rate (req/s)"

    def series(label: str, value: Callable[[dict[str, Any]], float | None],
               dashed: bool = False) -> svg.Series:
        return svg.Series(label, [(p["rate"], value(p)) for p in points], dashed)

    target = result.get("attainment_target")
    view.charts["attainment"] = svg.chart(
        [series("requests within the SLO", lambda p: p["attainment"] * 100)],
        "SLO attainment against offered rate", x_label, "within the SLO (%)", markers=rules,
        thresholds=[] if target is None else
        [svg.Rule(target * 100, f"target {fmt.percent(target, 1)}", "target")])
    limits = result.get("slo_seconds") or {}
    for m in view.metrics:
        limit = limits.get(m)
        view.charts[f"latency-{m}"] = svg.chart(
            [series(f"{m} {q}", _millis_of(m, q), dashed=q == "p50") for q in ("p50", "p99")],
            f"{m} against offered rate", x_label, f"{m} (ms, log scale)", markers=rules,
            log_y=True,
            thresholds=[] if limit is None else
            [svg.Rule(limit * 1000, f"SLO {m} {fmt.millis(limit)}", "slo")])
    view.charts["requests"] = svg.chart(
        [series("completed req/s", lambda p: p["summary"]["request_throughput"]),
         series("goodput req/s", lambda p: p["summary"]["goodput"]),
         series("offered req/s", lambda p: p["rate"], dashed=True)],
        "request throughput against offered rate", x_label, "throughput (req/s)",
        markers=rules)
    view.charts["tokens"] = svg.chart(
        [series("output tok/s", lambda p: p["summary"]["output_throughput"]),
         series("prompt + output tok/s", lambda p: p["summary"]["total_token_throughput"])],
        "token throughput against offered rate", x_label, "throughput (tok/s)",
        markers=rules)
    return view

