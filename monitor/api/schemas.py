"""Request and response bodies of the API, apart from the store's tables and the evaluator's
dataclasses (the conversions are in ``convert``). Floats that can be NaN or infinite in the
evaluator are ``None`` here: JSON has neither."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from monitor.collect.limits import BatchSource

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


class ErrorDetail(BaseModel):
    status: int
    code: str
    message: str
    file: str | None = Field(default=None, description="a bad configuration file")
    problems: list[str] | None = Field(default=None, description="one per bad field")


class ErrorBody(BaseModel):
    error: ErrorDetail


class BurnRateOut(BaseModel):
    window: str
    seconds: float
    events: float
    error_ratio: float | None
    burn_rate: float | None


class SloAlertOut(BaseModel):
    alertname: str
    severity: str
    window: str
    state: str
    group: dict[str, str] = Field(
        default_factory=dict, description="a split SLO's alert: its group's labels")


BudgetBasis = Literal["period", "partial", "none"]
BUDGET_BASIS = (
    "what budget_remaining (and the SLI) are computed over: \"period\", the events of the "
    "whole period (of the calendar period so far); \"partial\", the events of the "
    "observed_seconds of history only, shorter than the period (a young SLO, or a store that "
    "holds less than the period): the budget is 1 - bad / (error budget x events seen), a "
    "partial period's, not yet the period's; \"none\": no events, no budget")
OBSERVED_SECONDS = (
    "seconds of history the SLI and budget cover: from the first minute in the period in "
    "which a selected target answered to the evaluation; null before any answered")


class SloGroupOut(BaseModel):
    """One group of a split SLO (``grouping: [tenant]``): its own error ratio and budget."""

    labels: dict[str, str] = Field(description="the group's values: {\"tenant\": \"a\"}")
    state: Literal["ok", "burning", "no_data", "error"]
    sli: float | None
    events: float
    budget_remaining: float | None
    time_to_exhaustion_seconds: float | None
    burn_rates: list[BurnRateOut]
    error: str | None
    observed_seconds: float | None = Field(None, description=OBSERVED_SECONDS)
    budget_basis: BudgetBasis = Field("none", description=BUDGET_BASIS)


class SloOut(BaseModel):
    name: str
    service: str
    description: str
    objective: float
    period: str
    state: Literal["ok", "burning", "no_data", "error", "pending"]
    sli: float | None
    events: float
    budget_remaining: float | None = Field(
        description="fraction of the error budget of the events seen left: 1 - bad / (error "
                    "budget x events), below 0 when overspent; see budget_basis")
    observed_seconds: float | None = Field(None, description=OBSERVED_SECONDS)
    budget_basis: BudgetBasis = Field("none", description=BUDGET_BASIS)
    time_to_exhaustion_seconds: float | None = Field(
        description="seconds until the budget is gone at the current burn rate; null when "
                    "not burning")
    budget_state: Literal["healthy", "at_risk", "exhausted", "unknown"] = Field(
        description="for release gates: exhausted (no budget left), at_risk (gone before the "
                    "period ends at the current burn, or overspent at its end at the sustained "
                    "burn), healthy, or unknown (no events yet)")
    budget_at_period_end: float | None = Field(
        description="the budget forecast for the period's end at the sustained burn rate (the "
                    "longest alert window); below 0 when it would be overspent")
    period_end: float | None = Field(
        description="when the period ends: the calendar boundary, or one period from now for "
                    "a rolling window")
    sustained_burn_rate: float | None
    burn_rates: list[BurnRateOut]
    alerts: list[SloAlertOut]
    evaluated_at: float | None
    error: str | None
    warnings: list[str] = Field(
        default_factory=list,
        description="why the SLI is only a bound: a latency threshold that a target's stored "
                    "bucket edges lack (good events counted at the edge below)")
    groups: list[SloGroupOut] = Field(
        default_factory=list,
        description="a split SLO's groups (grouping: [tenant]) with events in the period, each "
                    "judged alone (its burn alerts carry its labels); empty for an SLO as a "
                    "whole")


class AlertOut(BaseModel):
    fingerprint: str
    alertname: str
    labels: dict[str, str]
    annotations: dict[str, str]
    state: Literal["pending", "firing", "resolved"]
    active_at: float
    fired_at: float | None
    resolved_at: float | None
    value: float | None


class AlertEventOut(BaseModel):
    """One change of an alert's state, from the alert history."""

    id: int
    at: float = Field(description="when the state changed (unix seconds)")
    fingerprint: str
    alertname: str
    labels: dict[str, str]
    annotations: dict[str, str]
    state: Literal["pending", "firing", "resolved", "inactive"] = Field(
        description="the state entered; inactive: a pending alert that stopped holding "
                    "before it fired (never sent)")
    previous_state: Literal["pending", "firing", "resolved"] | None = Field(
        description="null when the alert was new")
    fired_at: float | None = Field(
        description="the episode's startsAt, on its firing and resolved events")
    value: float | None


class HeadroomDimensionOut(BaseModel):
    dimension: str                    # requests_per_second, prompt_tokens_per_second, ...
    unit: str
    load: float
    capacity: float
    headroom_ratio: float


class HeadroomOut(BaseModel):
    """Load against the capacity a sweep measured: 1 - load / capacity, the least over the
    dimensions (``binding_dimension`` gives it); below ``warn_below_ratio`` is ``low``."""

    state: Literal["ok", "low", "no_data", "no_capacity"]
    headroom_ratio: float | None
    binding_dimension: str | None
    bench_binding_dimension: str | None   # what the sweep found binding
    warn_below_ratio: float
    capacity_source: str | None
    dimensions: list[HeadroomDimensionOut]
    evaluated_at: float
    error: str | None


class TargetOut(BaseModel):
    name: str
    url: str
    engine: str
    labels: dict[str, str]
    scrape_interval_seconds: float
    state: Literal["up", "down", "unknown"]
    last_scrape_at: float | None
    last_scrape_seconds: float | None
    last_error: str | None
    detected_engines: list[str] = Field(
        default_factory=list,
        description="the mapping tables its last answering page was read with: the engine "
                    "detected when ``engine`` is auto (and a GPU exporter sharing the page)")
    headroom: HeadroomOut | None = None   # targets with a capacity: block, once evaluated
    # The engine's batch limits as configured (null: not given; the engine may export them).
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None


class PercentileOut(BaseModel):
    """A percentile with what the engine's buckets vouch for (issue 21)."""

    value: float | None = Field(description="histogram_quantile's number (as in points)")
    refined: float | None = Field(
        default=None,
        description="inferwatch's own number in the same bucket, interpolated along the "
                    "density's local power law (closer than histogram_quantile's linear one: "
                    "p99 within 0.5% vs 2.6% on R20 buckets, issue 21)")
    lower: float | None = Field(description="the bucket edge below the percentile")
    upper: float | None = Field(description="the bucket edge above it; null: +Inf bucket")
    kind: Literal["exact_edge", "interpolated", "interval", "upper_bound", "lower_bound",
                  "no_data"] = Field(
        description="interpolated/exact_edge: the value may be quoted; interval: only "
                    "between lower and upper (bucket wider than 2x); upper_bound: in the "
                    "first bucket, only '< upper'; lower_bound: in +Inf, only '> lower'")


class PercentilePointOut(PercentileOut):
    """A percentile of one step (``points``' time) with its bucket edges."""

    time: float


class SeriesOut(BaseModel):
    target: str
    metric: str
    unit: str
    start: float
    end: float
    step: float
    points: list[tuple[float, float | None]]
    estimates: list[PercentilePointOut] | None = Field(
        default=None, description="percentile metrics only: per point of ``points``, the "
                                  "bucket edges around the value and what it may claim")
    batch_utilization_source: BatchSource | None = Field(
        default=None,
        description="batch_utilization and token_budget_utilization only: what the latest "
                    "point with a value is computed against: running requests over the "
                    "engine's exported max_num_seqs (engine_limit) or the target's configured "
                    "max_num_seqs (configured_max_num_seqs), or mean tokens per engine step "
                    "over max_num_batched_tokens (token_budget); null: no value")


class GaugeSummaryOut(BaseModel):
    """A gauge's readings over the window."""

    mean: float
    max: float = Field(description="the highest reading (summed over a count's series: an "
                                   "upper bound of the highest sum when there are several)")


class LatencySummaryOut(BaseModel):
    count: float = Field(description="observations in the window (requests; tokens for ITL)")
    mean_seconds: float | None = Field(description="exact: the histogram's sum over its count")
    percentiles: dict[str, PercentileOut] = Field(description="p50, p90, p95, p99")


class TargetSummaryOut(BaseModel):
    """One target over (start, end]: the scrapes stored in it, merged (rates are increases
    over the seconds they cover; percentiles from the merged buckets). A count is null when
    the engine does not export it, 0 when it does and nothing happened."""

    target: str
    start: float
    end: float
    state: Literal["up", "down"] = Field(description="down: no scrape answered in the window")
    error: str | None
    seconds_with_data: float = Field(description="seconds whose increases the window holds")
    prompt_tokens: float | None = Field(description="computed in prefill (cache hits apart)")
    prompt_tokens_cached: float | None = Field(description="served from the prefix cache")
    generation_tokens: float | None
    requests_finished: float | None
    errors: dict[str, float] = Field(description="by error_type")
    preemptions: float | None
    prompt_tokens_per_second: float | None
    generation_tokens_per_second: float | None
    requests_per_second: float | None
    prefix_cache_hit_ratio: float | None = Field(
        description="prompt tokens found in the prefix cache / looked up")
    requests_running: GaugeSummaryOut | None
    requests_waiting: GaugeSummaryOut | None
    kv_cache_usage_ratio: GaugeSummaryOut | None = Field(
        description="from used and capacity blocks where the engine gives both, else its "
                    "usage gauge")
    latency: dict[str, LatencySummaryOut] = Field(
        description="ttft, itl, tpot, e2e, queue: those the engine exports")


class RunOut(BaseModel):
    id: str
    kind: str
    name: str
    status: Literal["running", "done", "failed"]
    started_at: float
    finished_at: float | None
    config: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


_URL = r"^https?://[^\s/?#]+(/[^\s]*)?$"
_COUNT = r"[1-9][0-9]{0,5}"
_LENGTH = (rf"^(fixed:{_COUNT}|uniform:{_COUNT}-{_COUNT}|"
           rf"lognormal:{_COUNT}(,[0-9](\.[0-9]{{1,3}})?)?)$")


class WorkloadIn(_In):
    input_len: str = Field(default="uniform:50-150", pattern=_LENGTH,
                           description="fixed:N, uniform:LO-HI or lognormal:MEAN[,SIGMA] tokens")
    output_len: str = Field(default="fixed:32", pattern=_LENGTH)
    chars_per_token: float = Field(default=4.0, gt=0, le=100,
                                   description="1 for byte-level tokenizers")
    arrival: Literal["poisson", "gamma", "constant"] = "poisson"
    burstiness: float = Field(default=1.0, gt=0, le=100)
    api: Literal["completions", "chat"] = "completions"
    seed: int = Field(default=0, ge=0, le=2**31 - 1)


class LatencySloIn(_In):
    ttft_ms: float | None = Field(default=None, gt=0, le=3_600_000)
    tpot_ms: float | None = Field(default=None, gt=0, le=3_600_000)
    e2e_ms: float | None = Field(default=None, gt=0, le=3_600_000)


class SweepIn(_In):
    name: str = Field(default="sweep", min_length=1, max_length=200)
    url: str = Field(pattern=_URL, max_length=2000, description="the OpenAI-compatible base URL")
    model: str = Field(min_length=1, max_length=200)
    workload: WorkloadIn = WorkloadIn()
    slo: LatencySloIn = LatencySloIn(ttft_ms=200, tpot_ms=None, e2e_ms=None)
    attainment: float = Field(default=0.99, gt=0, le=1)
    start_rate: float = Field(default=1.0, gt=0, le=10_000)
    growth: float = Field(default=2.0, gt=1, le=100)
    max_rate: float = Field(default=1000.0, gt=0, le=100_000)
    step_seconds: float = Field(default=60.0, ge=1, le=3600)
    warmup_seconds: float = Field(default=5.0, ge=0, le=600)
    refine_steps: int = Field(default=2, ge=0, le=10)
    max_concurrency: int | None = Field(default=None, ge=1, le=100_000)


class LiveCanaryIn(_In):
    mode: Literal["live"] = "live"
    name: str = Field(default="canary", min_length=1, max_length=200)
    baseline_url: str = Field(pattern=_URL, max_length=2000)
    canary_url: str = Field(pattern=_URL, max_length=2000)
    model: str = Field(min_length=1, max_length=200)
    canary_model: str | None = Field(default=None, min_length=1, max_length=200)
    rate: float = Field(gt=0, le=10_000, description="requests/s to each endpoint")
    duration_seconds: float = Field(default=600.0, ge=1, le=86_400)
    warmup_seconds: float = Field(default=0.0, ge=0, le=600)
    interval_seconds: float = Field(default=10.0, ge=1, le=3600)
    workload: WorkloadIn = WorkloadIn()
    judge: str | None = Field(default=None, max_length=100_000,
                              description="judge configuration YAML; default: the packaged one")


class StoredCanaryIn(_In):
    mode: Literal["stored"]
    name: str = Field(default="canary", min_length=1, max_length=200)
    baseline_target: str = Field(min_length=1, max_length=200)
    canary_target: str = Field(min_length=1, max_length=200)
    start: float = Field(ge=0, le=1e11)
    end: float = Field(ge=0, le=1e11)
    step_seconds: float = Field(default=60.0, ge=1, le=86_400)
    judge: str | None = Field(default=None, max_length=100_000)


class NamesChangedOut(BaseModel):
    added: list[str]
    changed: list[str]
    removed: list[str]


class ChangesOut(BaseModel):
    slos: NamesChangedOut
    targets: NamesChangedOut
    restart_required: list[str] = Field(
        description="sections edited that are read at start only (store, "
                    "alerting.alertmanager_urls, anomaly)")


class ReloadOut(BaseModel):
    at: float
    trigger: str = Field(description='"start", "SIGHUP" or "api"')
    successful: bool
    seconds: float = Field(description="time to read, validate and apply")
    changes: ChangesOut
    error: str | None
    file: str | None
    problems: list[str]


class ConfigStatusOut(BaseModel):
    file: str | None
    slo_files: list[str]
    targets: list[str]
    slos: list[str]
    last_reload: ReloadOut | None
    last_successful_reload_at: float | None


class HaStatusOut(BaseModel):
    replica_id: str = Field(description="this replica (ha.replica_id, else hostname:pid)")
    role: str = Field(description='"active" (scrapes, evaluates, sends) or "standby"')
    elected: bool = Field(description="whether a lock decides the role: PostgreSQL's advisory "
                                      "lock, or on a SQLite file the <database>.lock file "
                                      "lock (false on in-memory SQLite: always active)")
    since: float = Field(description="when this replica took its role (Unix seconds)")
    active_replica_id: str | None = Field(description="the replica holding the lock now (on "
                                          "SQLite as its lock file names it at the last poll)")
    leader_changes: int = Field(description="times this replica became active or stepped down")
    holding: bool = Field(False, description="lost its lock to a database error and scraping "
                                             "on into its buffer until the database answers")
    poll_seconds: float


class RequestSummaryOut(BaseModel):
    """Exact figures of the stored request events (one row per request the gateway judged)."""

    num_requests: int
    num_good: int = Field(description="by each event's verdict at the edge, or by the "
                                      "thresholds the query gave")
    goodput_ratio: float | None = Field(description="num_good / num_requests; null: none")
    outcomes: dict[str, int]
    latency: dict[str, dict[str, float]] = Field(
        description="ttft, tpot, e2e -> p50, p90, p95, p99 in seconds, exact over the "
                    "successful requests (linear interpolation, as the load generator)")


class RequestsOut(BaseModel):
    start: float
    end: float
    criteria: str = Field(description="what counted as good")
    total: RequestSummaryOut
    groups: dict[str, RequestSummaryOut] | None = Field(
        description="one summary per value of group_by (null without it)")


class GroupSloOut(BaseModel):
    """A goodput SLO judged over one tenant's (class's, model's) stored request events."""

    value: str = Field(description="the tenant (hash or header value), SLO class or model")
    judged: bool = Field(description="events in the period >= the SLO's min_events; when "
                                     "false the SLO's burn alerts cannot fire for it")
    paging: bool = Field(description="a page-severity burn condition holds now")
    events: float
    attainment: float | None = Field(description="good / all over the period; null: none")
    budget_remaining: float | None = Field(description="fraction of the error budget left")
    burn_rates: dict[str, float | None] = Field(description="window -> burn rate (null: no "
                                                            "events in it)")
    firing: list[str] = Field(description="the burn windows whose condition holds now")


class RequestsSloOut(BaseModel):
    slo: str
    objective: float
    period: str
    by: str
    min_events: int
    evaluated_at: float
    groups: list[GroupSloOut]


class CostShareOut(BaseModel):
    num_requests: int
    prompt_tokens: int
    output_tokens: int
    work: float = Field(description="output + prefill_weight x prompt tokens")
    device_seconds: float
    cost: float | None = Field(description="device_seconds at the price per device-hour; "
                                           "null without a price")


class RequestsCostOut(BaseModel):
    start: float
    end: float
    by: str
    device_seconds: float = Field(description="engine time attributed: given, or the window's "
                                              "wall time x devices")
    device_hour_price: float | None
    prefill_weight: float
    unattributed_device_seconds: float
    total: CostShareOut
    groups: dict[str, CostShareOut]
