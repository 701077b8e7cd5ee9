"""The one SLO model everything else reads: the evaluator, the rule generator, the API.

Native YAML, OpenSLO v1 and Sloth prometheus/v1 files are all loaded into ``Slo``
(``monitor.slo.loaders``). An SLO says which events are good (the SLI), which fraction must
be (the objective), over which period (rolling or calendar), how events are budgeted
(``Occurrences``: every request counts; ``Timeslices``: a slice is good when its SLI meets
``timeslice_target``; ``RatioTimeslices``: the SLI is the mean of per-slice ratios), and which
targets of the store it is about (``selector``).

SLI kinds, over the normalized ``gen_ai_server_*`` schema:

- ``latency``: requests whose TTFT / ITL / TPOT / E2E is at most ``threshold`` (a bucket
  bound of the histogram, so the count is exact) over all requests.
- ``availability``: requests that did not fail with one of ``errors`` over all requests;
  a 429 (``rejected``) or a 400 (``bad_request``) counts only when listed.
- ``throughput``: tokens per second at least ``min_per_second``; only meaningful per
  timeslice, so it requires ``Timeslices`` budgeting.
- ``ratio``: any two counters (``good`` or ``bad``, and ``total``) with label matchers.
- ``goodput``: requests from the gateway's stored events (``inferwatch gateway --store``), good
  when they succeeded and met every target given (TTFT, TPOT, E2E: any value, no bucket edges;
  one target alone is a latency SLI off the edges); with none, the gateway's own verdict.
  The monitor evaluates it from the store; Prometheus has no events, so the rule generators
  leave it out (``prometheus_slos``).

``grouping`` (Pyrra's word; its ``indicator.ratio.grouping``) splits an Occurrences SLO by
labels of its series, e.g. ``grouping: [tenant]`` over the gateway's counters: the generated
rules sum ``by (tenant)``, so each tenant has its own error ratio, burn rate and budget, and
pages on its own burn with its ``tenant`` label. A split SLO's ``alerting.min_events`` gate
(events of one group in a burn window's long window) defaults to ``DEFAULT_GROUPED_MIN_EVENTS``:
a tenant sending a few requests an hour never pages on one bad one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from exporters import schema
from exporters.adapters.edges import EngineEdges
from monitor.slo.durations import format_duration, parse_duration
from monitor.slo.edges import (
    CountedAt,
    counted_at,
    layout,
    lower_edge_note,
    off_edge_message,
)

SLO_NAME_RE: Final = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,126}[a-z0-9])?$")
_LABEL_NAME_RE: Final = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")

# Latency SLIs by their short name: the histogram each one counts.
LATENCY_METRICS: Final[dict[str, str]] = {
    "ttft": schema.TIME_TO_FIRST_TOKEN,
    "itl": schema.INTER_TOKEN_LATENCY,
    "tpot": schema.TIME_PER_OUTPUT_TOKEN,
    "e2e": schema.REQUEST_DURATION,
}
# Throughput SLIs: the counters whose increase per second is the throughput.
THROUGHPUT_METRICS: Final[dict[str, tuple[str, ...]]] = {
    "generation_tokens": (schema.GENERATION_TOKENS,),
    "prompt_tokens": (schema.PROMPT_TOKENS,),
    "tokens": (schema.PROMPT_TOKENS, schema.GENERATION_TOKENS),
}
# Errors that happen before a request enters the engine: they are not in the requests
# counter, so when counted they are added to the total as well.
# An API server's 5xx (server_error) is counted at the HTTP layer, outside the engine's
# requests counter, so it is one of these too (docs/slos-on-engines.md: a non-streamed request
# that fails inside the engine is then counted twice, as model_error and as server_error).
PRE_ENGINE_ERRORS: Final[frozenset[str]] = frozenset({"rejected", "bad_request",
                                                      "server_error"})
DEFAULT_COUNTED_ERRORS: Final[tuple[str, ...]] = ("oom", "timeout", "model_error", "rejected",
                                                  "server_error")
# A split SLO's minimum events per group in a long window, unless alerting.min_events is given.
DEFAULT_GROUPED_MIN_EVENTS: Final = 100
# Labels an SLO cannot be split by: they name the SLO's own recorded series and alerts.
RESERVED_GROUPING: Final[frozenset[str]] = frozenset(
    {"slo", "window", "severity", "service", "alertname", "le", "__name__"})
# What a goodput SLI (stored request events) splits by: the events' label columns.
GOODPUT_GROUPING: Final[tuple[str, ...]] = ("model", "tenant", "slo_class")


def _duration(value: object) -> float:
    if isinstance(value, (str, int, float)):
        return parse_duration(value)
    raise ValueError(f"{value!r} is not a duration")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Budgeting(StrEnum):
    OCCURRENCES = "Occurrences"
    TIMESLICES = "Timeslices"
    RATIO_TIMESLICES = "RatioTimeslices"


class LatencySli(_Model):
    """Requests whose ``metric`` is at most ``threshold_seconds``, counted at the bucket edges
    of the engine the SLO reads (``monitor.slo.edges``): ``engine`` names it (a mapping
    table's engine, e.g. vllm; None: the inferwatch schema's own buckets), ``edges`` gives the
    histogram's edges where they are not the engine's defaults (a custom bucket flag, or as
    read off a live page). A threshold off those edges is refused, or with
    ``off_edge: lower_edge`` counted at the edge below in every evaluation path."""

    kind: Literal["latency"] = "latency"
    metric: Literal["ttft", "itl", "tpot", "e2e"]
    threshold_seconds: float = Field(gt=0)
    engine: str | None = None
    edges: tuple[float, ...] | None = None
    off_edge: Literal["refuse", "lower_edge"] = "refuse"

    @field_validator("threshold_seconds", mode="before")
    @classmethod
    def _threshold(cls, value: object) -> float:
        return _duration(value)

    @field_validator("edges")
    @classmethod
    def _edges(cls, value: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if value is None:
            return None
        if not value or any(not math.isfinite(e) or e <= 0 for e in value):
            raise ValueError("edges must be a non-empty list of positive, finite seconds")
        return tuple(sorted(set(value)))

    @model_validator(mode="after")
    def _countable(self) -> LatencySli:
        where, name, known = self._where()
        if not where.exact and self.off_edge == "refuse":
            raise ValueError(off_edge_message(self.histogram, where, name, known))
        return self

    def _where(self) -> tuple[CountedAt, str, EngineEdges]:
        try:
            name, edges, known = layout(self.engine, self.edges, self.histogram)
        except KeyError as exc:
            raise ValueError(str(exc)) from None
        if edges is None:
            raise ValueError(f"{name} has no histogram mapped to {self.histogram}: a {self.metric} "
                             "SLO cannot be counted from its metrics (a goodput SLI counts it "
                             "from the gateway's request events)")
        return counted_at(edges, self.threshold_seconds), name, known

    @property
    def counted_at(self) -> CountedAt:
        """Where good events are counted: the threshold itself, or the edge below it."""
        return self._where()[0]

    @property
    def layout_edges(self) -> tuple[float, ...]:
        """The histogram's edges on the engine this SLI reads."""
        return layout(self.engine, self.edges, self.histogram)[1] or ()

    @property
    def edge_note(self) -> str | None:
        """What is counted instead of the threshold, or None when it is exact."""
        where, name, _ = self._where()
        return None if where.exact else lower_edge_note(self.histogram, where, name)

    @property
    def histogram(self) -> str:
        return LATENCY_METRICS[self.metric]


class AvailabilitySli(_Model):
    kind: Literal["availability"] = "availability"
    errors: tuple[str, ...] = DEFAULT_COUNTED_ERRORS

    @field_validator("errors")
    @classmethod
    def _known_errors(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [e for e in value if e not in schema.ERROR_TYPES]
        if unknown:
            raise ValueError(f"unknown error types {unknown}; known: {list(schema.ERROR_TYPES)}")
        if not value:
            raise ValueError("at least one error type must count as bad")
        return tuple(sorted(set(value)))


class ThroughputSli(_Model):
    kind: Literal["throughput"] = "throughput"
    metric: Literal["generation_tokens", "prompt_tokens", "tokens"] = "generation_tokens"
    min_per_second: float = Field(gt=0)

    @property
    def counters(self) -> tuple[str, ...]:
        return THROUGHPUT_METRICS[self.metric]


class CounterQuery(_Model):
    """A counter by its schema name (without _total) and exact label values to match."""

    metric: str
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("metric")
    @classmethod
    def _a_counter(cls, value: str) -> str:
        name = value.removesuffix("_total")
        try:
            spec = schema.get_spec(name)
        except KeyError:
            raise ValueError(f"{value!r} is not a metric of the inferwatch schema") from None
        if spec.type is not schema.MetricType.COUNTER:
            raise ValueError(f"{value!r} is a {spec.type}, not a counter")
        return spec.name

    @field_validator("labels")
    @classmethod
    def _label_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if not _LABEL_NAME_RE.match(k)]
        if bad:
            raise ValueError(f"not Prometheus label names: {bad}")
        return value


class RatioSli(_Model):
    kind: Literal["ratio"] = "ratio"
    good: CounterQuery | None = None
    bad: CounterQuery | None = None
    total: CounterQuery

    @model_validator(mode="after")
    def _good_or_bad(self) -> RatioSli:
        if (self.good is None) == (self.bad is None):
            raise ValueError("give exactly one of good and bad, beside total")
        return self


class GoodputSli(_Model):
    kind: Literal["goodput"] = "goodput"
    ttft_seconds: float | None = Field(default=None, gt=0)
    tpot_seconds: float | None = Field(default=None, gt=0)
    e2e_seconds: float | None = Field(default=None, gt=0)
    # Which events: exact values of the gateway's labels (tenant: its hash or header value).
    model: str | None = None
    tenant: str | None = None
    slo_class: str | None = None

    @field_validator("ttft_seconds", "tpot_seconds", "e2e_seconds", mode="before")
    @classmethod
    def _target(cls, value: object) -> float | None:
        return None if value is None else _duration(value)

    def describe(self) -> str:
        """What it counts, in words."""
        targets = [f"{name} <= {format_duration(value)}" for name, value in
                   (("TTFT", self.ttft_seconds), ("TPOT", self.tpot_seconds),
                    ("E2E", self.e2e_seconds)) if value is not None]
        which = "".join(f" {k}={v}" for k, v in (("model", self.model), ("tenant", self.tenant),
                                                 ("slo_class", self.slo_class)) if v is not None)
        judged = ("succeeding with " + " and ".join(targets)) if targets \
            else "good by the gateway's verdict"
        return f"requests (stored events{which}) {judged}"

    @property
    def judged_at_the_gateway(self) -> bool:
        """No target given: the verdict stored with each event counts."""
        return self.ttft_seconds is None and self.tpot_seconds is None \
            and self.e2e_seconds is None


Sli = Annotated[LatencySli | AvailabilitySli | ThroughputSli | RatioSli | GoodputSli,
                Field(discriminator="kind")]


class TimeWindow(_Model):
    """Rolling (``duration``) or calendar-aligned (``calendar: month`` / ``week``, UTC)."""

    duration_seconds: float | None = None
    calendar: Literal["month", "week"] | None = None

    @field_validator("duration_seconds", mode="before")
    @classmethod
    def _parse(cls, value: object) -> float | None:
        return None if value is None else _duration(value)

    @model_validator(mode="after")
    def _one_kind(self) -> TimeWindow:
        if (self.duration_seconds is None) == (self.calendar is None):
            raise ValueError("give a rolling duration (e.g. 30d) or a calendar (month, week)")
        return self

    @property
    def is_rolling(self) -> bool:
        return self.duration_seconds is not None

    @property
    def nominal_seconds(self) -> float:
        """The period's length for burn-rate factors: a calendar month counts as 30 days."""
        if self.duration_seconds is not None:
            return self.duration_seconds
        return 30 * 86400.0 if self.calendar == "month" else 7 * 86400.0

    def __str__(self) -> str:
        if self.duration_seconds is not None:
            return format_duration(self.duration_seconds)
        return f"calendar {self.calendar}"


class Selector(_Model):
    """Which stored targets the SLO is about: one by name, or all with these labels."""

    target: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)


class AlertTemplate(_Model):
    """What a spec's author set for alerts: a name (Prometheus ``alert:``, the ``alertname``
    label), labels added to ours (theirs win, ``slo`` and ``window`` excepted) and annotations.
    Sloth's ``alerting`` and its ``page_alert``/``ticket_alert``; OpenSLO's AlertPolicy."""

    name: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)

    @field_validator("labels")
    @classmethod
    def _label_names(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if not _LABEL_NAME_RE.match(k) or k.startswith("__")]
        if bad:
            raise ValueError(f"not Prometheus label names: {bad}")
        return value


class ExplicitWindow(_Model):
    """A burn-rate condition given in the SLO file (OpenSLO AlertCondition, or by hand)
    instead of the windows table: burn rate above ``factor`` over both windows."""

    severity: Literal["page", "ticket"]
    long_seconds: float
    short_seconds: float
    # Below 1 an alert would fire while the budget is on course to last the period.
    factor: float = Field(ge=1)
    for_seconds: float = Field(default=0.0, ge=0)
    alert: AlertTemplate = AlertTemplate()  # this condition's own name, labels, annotations

    @field_validator("long_seconds", "short_seconds", mode="before")
    @classmethod
    def _parse(cls, value: object) -> float:
        return _duration(value)

    @field_validator("for_seconds", mode="before")
    @classmethod
    def _parse_for(cls, value: object) -> float:
        return 0.0 if value in (0, "0", "0s", "0m") else _duration(value)

    @model_validator(mode="after")
    def _short_inside_long(self) -> ExplicitWindow:
        if not self.short_seconds < self.long_seconds:
            raise ValueError("the short window must be shorter than the long one")
        return self


class Alerting(_Model):
    page: bool = True
    ticket: bool = True
    # Fewer events than this in a long window cannot fire its alert (low traffic); an SLO
    # split by ``grouping`` counts one group's events and defaults to 100 (Slo._grouping).
    min_events: int = Field(default=0, ge=0)
    # No data for this long is the NoData state and, once it lasts, its own ticket.
    no_data_after_seconds: float = 900.0
    runbook_url: str | None = None
    dashboard_url: str | None = None
    # A burn-window table of its own instead of the default (monitor/slo/burn_windows.yaml).
    windows_file: str | None = None
    # Conditions given explicitly; when present they replace the windows table.
    windows: tuple[ExplicitWindow, ...] = ()
    # The author's alert name, labels and annotations: for every alert of the SLO, then for
    # its pages and its tickets (later wins).
    alert: AlertTemplate = AlertTemplate()
    page_alert: AlertTemplate = AlertTemplate()
    ticket_alert: AlertTemplate = AlertTemplate()

    @field_validator("no_data_after_seconds", mode="before")
    @classmethod
    def _parse(cls, value: object) -> float:
        return _duration(value)


class Slo(_Model):
    name: str
    service: str = "inference"
    description: str = ""
    sli: Sli
    objective: float = Field(gt=0, lt=1)
    window: TimeWindow = TimeWindow(duration_seconds=30 * 86400.0)
    budgeting: Budgeting = Budgeting.OCCURRENCES
    timeslice_seconds: float | None = None
    # Timeslices: a slice is good when its ratio of good events reaches this.
    timeslice_target: float | None = Field(default=None, gt=0, le=1)
    selector: Selector = Selector()
    # Split by these labels: an error ratio, budget and alerts per value (see the docstring).
    grouping: tuple[str, ...] = ()
    alerting: Alerting = Alerting()
    labels: dict[str, str] = Field(default_factory=dict)

    @field_validator("window", mode="before")
    @classmethod
    def _window(cls, value: object) -> object:
        """``window: 30d`` is a rolling window; ``window: {calendar: month}`` a calendar one."""
        if isinstance(value, (str, int, float)):
            return {"duration_seconds": value}
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not SLO_NAME_RE.match(value):
            raise ValueError(f"{value!r}: an SLO name is lower-case letters, digits, '.', '_' "
                             "and '-', starting and ending with a letter or digit")
        return value

    @field_validator("timeslice_seconds", mode="before")
    @classmethod
    def _slice(cls, value: object) -> float | None:
        return None if value is None else _duration(value)

    @model_validator(mode="after")
    def _budgeting(self) -> Slo:
        sliced = self.budgeting is not Budgeting.OCCURRENCES
        if sliced and self.timeslice_seconds is None:
            raise ValueError(f"budgeting {self.budgeting} needs timeslice_seconds")
        if not sliced and self.timeslice_seconds is not None:
            raise ValueError("timeslice_seconds is only for Timeslices/RatioTimeslices budgeting")
        if self.timeslice_seconds is not None and self.timeslice_seconds % 60:
            raise ValueError(f"timeslice_seconds must be whole minutes, got "
                             f"{self.timeslice_seconds:g}")
        if isinstance(self.sli, ThroughputSli):
            if self.budgeting is not Budgeting.TIMESLICES:
                raise ValueError("a throughput SLI is judged per timeslice: use budgeting "
                                 "Timeslices with timeslice_seconds")
            if self.timeslice_target is not None:
                raise ValueError("a throughput slice is good when its rate reaches "
                                 "min_per_second; timeslice_target does not apply")
        elif self.budgeting is Budgeting.TIMESLICES and self.timeslice_target is None:
            raise ValueError("Timeslices budgeting of a ratio SLI needs timeslice_target "
                             "(e.g. 0.99: a slice is good when 99% of its requests are)")
        elif self.budgeting is not Budgeting.TIMESLICES and self.timeslice_target is not None:
            raise ValueError("timeslice_target is only for Timeslices budgeting")
        return self

    @model_validator(mode="after")
    def _grouping(self) -> Slo:
        if not self.grouping:
            return self
        check_grouping(self)
        if "min_events" not in self.alerting.model_fields_set:
            # frozen: set once here, while the model is being built
            object.__setattr__(self, "alerting", self.alerting.model_copy(
                update={"min_events": DEFAULT_GROUPED_MIN_EVENTS}))
        return self

    @property
    def from_events(self) -> bool:
        """Read from the stored request events, not from metrics (no Prometheus rules)."""
        return isinstance(self.sli, GoodputSli)

    @property
    def error_budget(self) -> float:
        """The fraction of events (or slices) allowed to be bad."""
        return 1.0 - self.objective


def check_grouping(slo: Slo) -> None:
    """Refuse a split that cannot mean one SLO per label value, naming the label."""
    labels = slo.grouping
    bad = [k for k in labels if not _LABEL_NAME_RE.match(k) or k.startswith("__")]
    if bad:
        raise ValueError(f"grouping: not Prometheus label names: {bad}")
    if len(set(labels)) != len(labels):
        raise ValueError(f"grouping: a label is given twice: {list(labels)}")
    if reserved := sorted(set(labels) & RESERVED_GROUPING):
        raise ValueError(f"grouping: {reserved} name the SLO's own series and alerts; "
                         "split by labels of the SLI's series (tenant, model, slo_class...)")
    if slo.budgeting is not Budgeting.OCCURRENCES:
        raise ValueError(f"grouping: only Occurrences budgeting splits per label, not "
                         f"{slo.budgeting} (a slice would be judged per group)")
    sli = slo.sli
    if isinstance(sli, GoodputSli):
        if outside := [k for k in labels if k not in GOODPUT_GROUPING]:
            raise ValueError(f"grouping: a goodput SLI splits by "
                             f"{', '.join(GOODPUT_GROUPING)}, not {outside}")
        if pinned := [k for k in labels if getattr(sli, k) is not None]:
            raise ValueError(f"grouping: the SLI already selects one {pinned[0]}")
    pinned_by = {**slo.selector.labels, **slo.labels, **slo.alerting.alert.labels,
                 **slo.alerting.page_alert.labels, **slo.alerting.ticket_alert.labels}
    for window in slo.alerting.windows:
        pinned_by.update(window.alert.labels)
    if isinstance(sli, RatioSli):
        for query in (sli.good, sli.bad, sli.total):
            pinned_by.update(query.labels if query is not None else {})
    if pinned := sorted(set(labels) & set(pinned_by)):
        raise ValueError(f"grouping: {pinned} also given a fixed value (selector, SLI, SLO or "
                         "alert labels); a split label takes every value")


def prometheus_slos(slos: Sequence[Slo]) -> list[Slo]:
    """The SLOs Prometheus rules can express: all but those read from request events."""
    return [slo for slo in slos if not slo.from_events]
