"""The panel list (panels.yaml) as validated data: dashboards, rows, panels, targets.

A bad file fails with one ``PanelFileError`` naming the file and every bad field, like the SLO
loader. Metrics are schema constant names (``GENERATION_TOKENS``), resolved here so that a
typo or a metric of the wrong type is refused before any JSON is written.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any, Final, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from exporters import schema
from exporters.schema import MetricSpec, MetricType

PACKAGED: Final = "monitor/dashboards/panels.yaml"

Form = Literal[
    "rate", "rate_trend", "rate_baseline", "quantiles", "mean", "mean_over", "heatmap",
    "gauge", "ratio", "count", "count_changes", "per_replica", "cost_per_million_tokens",
    "error_ratio",
    "slo_budget_remaining", "slo_exhaustion_hours", "slo_alert_state", "slo_alerts",
    "capacity_headroom",
]
PanelType = Literal["timeseries", "stat", "gauge", "bargauge", "heatmap", "table",
                    "state-timeline"]
Variable = Literal["datasource", "job", "model", "instance", "slo", "gpu_hour_price",
                   "gpus_per_replica"]

# The metric type each form reads (None: any type); SLO forms read recorded series only.
FORM_TYPES: Final[dict[str, MetricType | None]] = {
    "rate": MetricType.COUNTER, "rate_trend": MetricType.COUNTER,
    "rate_baseline": MetricType.COUNTER, "per_replica": MetricType.COUNTER,
    "cost_per_million_tokens": MetricType.COUNTER, "error_ratio": MetricType.COUNTER,
    "quantiles": MetricType.HISTOGRAM, "mean": MetricType.HISTOGRAM,
    "mean_over": MetricType.HISTOGRAM,
    "heatmap": MetricType.HISTOGRAM, "gauge": MetricType.GAUGE, "ratio": MetricType.GAUGE,
    "count": None, "count_changes": None,
}
NEEDS_OVER: Final = frozenset({"ratio", "mean_over", "per_replica",
                               "cost_per_million_tokens", "error_ratio"})
TARGET_LABELS: Final = ("job", "instance")  # added by Prometheus to every scraped series
# Labels of the monitor's own headroom series (monitor/headroom/metrics.py).
HEADROOM_LABELS: Final = ("target", "dimension")


def metric_spec(constant: str) -> MetricSpec:
    """The schema spec named by a constant of exporters.schema (``GENERATION_TOKENS``)."""
    name = getattr(schema, constant, None) if constant.isupper() else None
    if not isinstance(name, str):
        raise ValueError(f"{constant!r} is not a metric constant of exporters/schema.py")
    return schema.get_spec(name)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TargetSpec(_Model):
    form: Form
    metric: str | None = None
    over: str | None = None  # the denominator (ratio, error_ratio) or the replica gauge
    by: tuple[str, ...] = ()
    agg: Literal["sum", "max", "min", "avg"] = "sum"
    quantiles: tuple[float, ...] = ()
    window: str | None = None  # rate_trend / rate_baseline: the subquery range
    legend: str = ""
    instant: bool = False
    otherwise: TargetSpec | None = None  # fallback joined with `or`

    @field_validator("quantiles")
    @classmethod
    def _quantiles(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if any(not 0 < q < 1 for q in value):
            raise ValueError("quantiles must lie strictly between 0 and 1")
        return value

    @model_validator(mode="after")
    def _fits_its_form(self) -> TargetSpec:
        if self.form.startswith("slo_"):
            if self.metric or self.over or self.by:
                raise ValueError(f"form {self.form} takes no metric, over or by")
            return self
        if self.form == "capacity_headroom":
            if self.metric or self.over or any(b not in HEADROOM_LABELS for b in self.by):
                raise ValueError(f"form {self.form} takes no metric or over, and `by` of "
                                 f"{', '.join(HEADROOM_LABELS)}")
            return self
        if self.metric is None:
            raise ValueError(f"form {self.form} needs a metric")
        spec = metric_spec(self.metric)
        wanted = FORM_TYPES[self.form]
        if wanted is not None and spec.type is not wanted:
            raise ValueError(f"form {self.form} reads a {wanted}, but {self.metric} "
                             f"({spec.name}) is a {spec.type}")
        if (self.over is None) == (self.form in NEEDS_OVER):
            raise ValueError(f"form {self.form}: `over` is "
                             f"{'required' if self.form in NEEDS_OVER else 'not allowed'}")
        over = metric_spec(self.over) if self.over else None
        for label in self.by:
            if label not in (*spec.labels, *TARGET_LABELS):
                raise ValueError(f"by: {self.metric} has no label {label!r} "
                                 f"(its labels: {', '.join(spec.labels) or 'none'})")
        if over is not None and self.form in ("ratio", "mean_over", "per_replica",
                                              "cost_per_million_tokens"):
            missing = [b for b in self.by if b not in (*over.labels, *TARGET_LABELS)]
            if missing:
                raise ValueError(f"by: {self.over} has no label {missing[0]!r}")
        if (self.form == "quantiles") != bool(self.quantiles):
            raise ValueError("`quantiles` goes with form quantiles, and it needs them")
        if (self.form in ("rate_trend", "rate_baseline")) != (self.window is not None):
            raise ValueError("`window` goes with forms rate_trend and rate_baseline, which "
                             "need it")
        return self


class PanelSpec(_Model):
    title: str = Field(min_length=1)
    type: PanelType
    description: str = ""
    unit: str = "short"
    width: int = Field(default=12, ge=1, le=24)
    height: int = Field(default=8, ge=2, le=40)
    min: float | None = None
    max: float | None = None
    decimals: int | None = Field(default=None, ge=0)
    stack: bool = False
    slo_thresholds: bool = False  # latency SLOs' bounds as red threshold lines
    thresholds: tuple[tuple[str, float | None], ...] = ()  # (colour, from value); first None
    targets: tuple[TargetSpec, ...] = Field(min_length=1)

    @field_validator("thresholds")
    @classmethod
    def _steps(cls, value: tuple[tuple[str, float | None], ...]
               ) -> tuple[tuple[str, float | None], ...]:
        if value and (value[0][1] is not None or any(v is None for _, v in value[1:])):
            raise ValueError("thresholds: the first step's value is null (the base), the "
                             "others numbers")
        return value


class RowSpec(_Model):
    title: str = Field(min_length=1)
    panels: tuple[PanelSpec, ...] = ()
    generate: Literal["burn_rates"] | None = None  # one row per SLO period, from the specs

    @model_validator(mode="after")
    def _panels_or_generated(self) -> RowSpec:
        if bool(self.panels) == (self.generate is not None):
            raise ValueError("a row has either panels or `generate`")
        return self


class DashboardSpec(_Model):
    uid: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,39}$")
    file: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*\.json$")
    title: str = Field(min_length=1)
    description: str = ""
    variables: tuple[Variable, ...] = Field(min_length=1)
    rows: tuple[RowSpec, ...] = Field(min_length=1)

    @field_validator("variables")
    @classmethod
    def _datasource_first(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if value[0] != "datasource" or len(set(value)) != len(value):
            raise ValueError("variables: datasource first, each once")
        return value


class CostSpec(_Model):
    gpu_hour_price: float = Field(default=2.5, ge=0)
    gpus_per_replica: float = Field(default=1, gt=0)


class PanelFile(_Model):
    cost: CostSpec = CostSpec()
    dashboards: tuple[DashboardSpec, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> PanelFile:
        for field in ("uid", "file"):
            values = [getattr(d, field) for d in self.dashboards]
            if len(set(values)) != len(values):
                raise ValueError(f"dashboard {field}s must be unique")
        return self


class PanelFileError(Exception):
    """A panel list that cannot be used; the message names the file and every bad field."""


def load_panels(path: str | os.PathLike[str] | None = None) -> PanelFile:
    """The panel list of ``path``, or the packaged panels.yaml."""
    if path is None:
        source = PACKAGED
        text = resources.files("monitor.dashboards").joinpath("panels.yaml").read_text()
    else:
        source = str(path)
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise PanelFileError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PanelFileError(f"{source}: not YAML: {exc}") from None
    try:
        return PanelFile.model_validate(data)
    except ValidationError as exc:
        problems = "\n".join(
            f"  {'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}"
            for e in exc.errors())
        raise PanelFileError(f"{source}: invalid panel list:\n{problems}") from None
