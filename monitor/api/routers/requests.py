"""/api/v1/requests: exact SLIs from the stored request events (``inferwatch gateway --store``):
percentiles over every request of a window and goodput, per tenant, class or model."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from monitor.api.deps import StateDep
from monitor.api.errors import bad_request
from monitor.api.schemas import ErrorBody, RequestsOut, RequestSummaryOut
from monitor.api.timeparse import parse_range
from monitor.store.request_events import RequestFilter, read_request_events
from monitor.store.request_sli import (
    GoodputCriteria,
    RequestSummary,
    summarize_by,
    summarize_requests,
)

router = APIRouter(prefix="/api/v1/requests", tags=["requests"])

_BAD_REQUEST: dict[int | str, dict[str, Any]] = {400: {"model": ErrorBody}}
_NO_NUL = r"^[^\x00]*$"
_DEFAULT_SECONDS = 3600.0
Label = Annotated[str | None, Query(max_length=200, pattern=_NO_NUL)]
Millis = Annotated[float | None, Query(gt=0, le=3_600_000)]


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
