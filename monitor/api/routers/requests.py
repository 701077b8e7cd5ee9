"""/api/v1/requests: exact SLIs from the stored request events (``inferwatch gateway --store``):
percentiles over every request of a window and goodput, per tenant, class or model."""

from __future__ import annotations

import math
import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from monitor.api.deps import StateDep
from monitor.api.errors import bad_request, not_found
from monitor.api.schemas import (
    CostShareOut,
    ErrorBody,
    GroupSloOut,
    RequestsCostOut,
    RequestsOut,
    RequestsSloOut,
    RequestSummaryOut,
)
from monitor.api.timeparse import parse_range
from monitor.loadgen.capacity import DEFAULT_PREFILL_WEIGHT
from monitor.slo.breakdown import GroupSlo, slo_by_group
from monitor.slo.windows import NO_DATA_ALERT
from monitor.store.request_cost import CostModel, CostShare, attribute_cost
from monitor.store.request_events import RequestFilter, read_request_events
from monitor.store.request_sli import (
    GoodputCriteria,
    RequestSummary,
    summarize_by,
    summarize_requests,
)

router = APIRouter(prefix="/api/v1/requests", tags=["requests"])

_BAD_REQUEST: dict[int | str, dict[str, Any]] = {400: {"model": ErrorBody}}
_BAD_OR_MISSING: dict[int | str, dict[str, Any]] = {**_BAD_REQUEST, 404: {"model": ErrorBody}}
_NO_NUL = r"^[^\x00]*$"
_DEFAULT_SECONDS = 3600.0
Label = Annotated[str | None, Query(max_length=200, pattern=_NO_NUL)]
Millis = Annotated[float | None, Query(gt=0, le=3_600_000)]
By = Literal["tenant", "slo_class", "model"]


@router.get("/summary", response_model=RequestsOut, responses=_BAD_REQUEST,
            summary="Exact latency percentiles and goodput of the stored requests")
def requests_summary(state: StateDep,
                     start: Annotated[str | None, Query(description="default: end - 1h")]
                     = None,
                     end: Annotated[str | None, Query(description="default: now")] = None,
                     model: Label = None, tenant: Label = None, slo_class: Label = None,
                     group_by: Literal["tenant", "slo_class", "model"] | None = None,
                     ttft_ms: Millis = None, tpot_ms: Millis = None, e2e_ms: Millis = None,
                     ) -> RequestsOut:
    """Without thresholds a request is good by its verdict at the gateway (its SLO class's
    targets); with ``ttft_ms``/``tpot_ms``/``e2e_ms`` by those, any value, no bucket edges."""
    start_s, end_s = parse_range(start, end, time.time(), _DEFAULT_SECONDS)
    criteria = _criteria(ttft_ms, tpot_ms, e2e_ms)
    rows = read_request_events(state.store.engine, RequestFilter(
        start_s, end_s, model=model, tenant=tenant, slo_class=slo_class))
    groups = None if group_by is None else {
        key: _out(summary) for key, summary in summarize_by(rows, group_by, criteria).items()}
    described = "the gateway's verdict (SLO class targets)" if criteria is None else \
        " and ".join(f"{name} <= {value:g} ms" for name, value in
                     (("ttft", ttft_ms), ("tpot", tpot_ms), ("e2e", e2e_ms)) if value)
    return RequestsOut(start=start_s, end=end_s, criteria=described,
                       total=_out(summarize_requests(rows, criteria)), groups=groups)


def _criteria(ttft_ms: float | None, tpot_ms: float | None, e2e_ms: float | None
              ) -> GoodputCriteria | None:
    if ttft_ms is None and tpot_ms is None and e2e_ms is None:
        return None
    try:
        return GoodputCriteria(*(None if ms is None else ms / 1000
                                 for ms in (ttft_ms, tpot_ms, e2e_ms)))
    except ValueError as exc:
        raise bad_request(str(exc)) from None


def _out(summary: RequestSummary) -> RequestSummaryOut:
    return RequestSummaryOut(num_requests=summary.num_requests, num_good=summary.num_good,
                             goodput_ratio=summary.goodput_ratio, outcomes=summary.outcomes,
                             latency=summary.latency)


@router.get("/slo", response_model=RequestsSloOut, responses=_BAD_OR_MISSING,
            summary="A goodput SLO per tenant, class or model: attainment, burn, budget")
def requests_slo(state: StateDep, slo: Annotated[str, Query(max_length=200, pattern=_NO_NUL)],
                 by: By = "tenant") -> RequestsSloOut:
    """Each value found in the SLO's period is judged alone by the monitor's evaluator, with
    the SLO's burn windows and ``min_events`` gate (below it: not judged, never pages)."""
    spec = state.slo(slo)
    if spec is None:
        raise not_found("SLO", slo)
    now = time.time()
    try:
        groups = slo_by_group(state.store, spec, by, now, state.config().settle_seconds)
    except ValueError as exc:
        raise bad_request(str(exc)) from None
    return RequestsSloOut(slo=spec.name, objective=spec.objective, period=str(spec.window),
                          by=by, min_events=spec.alerting.min_events, evaluated_at=now,
                          groups=[_group_out(g) for g in groups])


@router.get("/cost", response_model=RequestsCostOut, responses=_BAD_REQUEST,
            summary="Engine time and cost per tenant, class or model, by weighted tokens")
def requests_cost(state: StateDep,
                  start: Annotated[str | None, Query(description="default: end - 1h")] = None,
                  end: Annotated[str | None, Query(description="default: now")] = None,
                  by: By = "tenant", model: Label = None,
                  devices: Annotated[float, Query(gt=0, le=1_000_000)] = 1.0,
                  device_seconds: Annotated[float | None, Query(ge=0)] = None,
                  gpu_hour_price: Annotated[float | None, Query(ge=0)] = None,
                  prefill_weight: Annotated[float, Query(ge=0, le=1000)]
                  = DEFAULT_PREFILL_WEIGHT,
                  max_groups: Annotated[int | None, Query(ge=1, le=10_000)] = None,
                  ) -> RequestsCostOut:
    """The engine's device-seconds (``device_seconds``, or the window's wall time x
    ``devices``) split by each request's output + prefill_weight x prompt tokens, priced at
    ``gpu_hour_price`` (the capacity model's price); beyond ``max_groups``: "other"."""
    start_s, end_s = parse_range(start, end, time.time(), _DEFAULT_SECONDS)
    try:
        cost_model = CostModel(device_seconds, gpu_hour_price, prefill_weight) \
            if device_seconds is not None else CostModel.from_wall_time(
                start_s, end_s, devices, gpu_hour_price, prefill_weight)
    except ValueError as exc:
        raise bad_request(str(exc)) from None
    rows = read_request_events(state.store.engine, RequestFilter(start_s, end_s, model=model))
    found = attribute_cost(rows, by, cost_model, max_groups)
    return RequestsCostOut(
        start=start_s, end=end_s, by=by, device_seconds=cost_model.device_seconds,
        device_hour_price=gpu_hour_price, prefill_weight=prefill_weight,
        unattributed_device_seconds=found.unattributed_device_seconds,
        total=_cost_out(found.total),
        groups={key: _cost_out(share) for key, share in found.groups.items()})


def _group_out(group: GroupSlo) -> GroupSloOut:
    status = group.status
    return GroupSloOut(
        value=group.value, judged=group.judged, paging=group.paging, events=status.events,
        attainment=_finite(status.sli), budget_remaining=_finite(status.budget_remaining),
        burn_rates={b.window: _finite(b.burn_rate) for b in status.burn_rates},
        firing=[c.labels.get("window", "") for c in status.conditions
                if c.active and c.labels.get("alertname") != NO_DATA_ALERT])


def _cost_out(share: CostShare) -> CostShareOut:
    return CostShareOut(num_requests=share.num_requests, prompt_tokens=share.prompt_tokens,
                        output_tokens=share.output_tokens, work=share.work,
                        device_seconds=share.device_seconds, cost=share.cost)


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None
