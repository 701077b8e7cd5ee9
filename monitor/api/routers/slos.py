"""/api/v1/slos: each SLO's state now, and its compliance report over a period."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, JSONResponse

from monitor.api.convert import slo_outs
from monitor.api.deps import Limit, Offset, StateDep
from monitor.api.errors import bad_request, not_found
from monitor.api.schemas import ErrorBody, Page, SloOut
from monitor.api.state import ServiceState
from monitor.api.timeparse import parse_range
from monitor.slo.report import build_report
from monitor.slo.source import StoreSliSource
from monitor.slo.spec import Slo

router = APIRouter(prefix="/api/v1/slos", tags=["slos"])

_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody}}


def _outs(state: ServiceState) -> list[SloOut]:
    statuses = {s.name: s for s in (state.alerting.statuses if state.alerting else [])}
    alerts = state.alerting.book.alerts() if state.alerting is not None else []
    return slo_outs(state.slos, statuses, alerts)


def _slo(state: ServiceState, name: str) -> Slo:
    slo = state.slo(name)
    if slo is None:
        raise not_found("SLO", name)
    return slo


@router.get("", response_model=Page[SloOut],
            summary="Every SLO: SLI, budget remaining, burn rates, alert state")
def list_slos(state: StateDep, limit: Limit = 100, offset: Offset = 0) -> Page[SloOut]:
    outs = _outs(state)
    return Page(items=outs[offset:offset + limit], total=len(outs), limit=limit, offset=offset)


@router.get("/{name}", response_model=SloOut, responses=_NOT_FOUND, summary="One SLO now")
def get_slo(state: StateDep, name: str) -> SloOut:
    _slo(state, name)
    return next(o for o in _outs(state) if o.name == name)


@router.get("/{name}/report", responses={
    **_NOT_FOUND, 400: {"model": ErrorBody},
    200: {"content": {"application/json": {}, "text/html": {}},
          "description": "the report as JSON, or an HTML page with plots"}},
    summary="Compliance over a period: SLI against the objective, budget burn-down, burn "
            "rates", response_model=None)
def report(state: StateDep, name: str,
           start: Annotated[str | None, Query(description="unix seconds or ISO 8601; "
                                                          "default: end minus the SLO's period")]
           = None,
           end: Annotated[str | None, Query(description="default: now")] = None,
           step: Annotated[float | None, Query(ge=60, le=86400 * 31,
                                               description="seconds, whole minutes")] = None,
           format: Literal["json", "html"] = "json") -> JSONResponse | HTMLResponse:
    slo = _slo(state, name)
    start_s, end_s = parse_range(start, end, time.time(), slo.window.nominal_seconds)
    try:
        # Minutes end once their scrapes are stored: leave the last settle seconds out (more
        # with PromQL targets, whose windows are read promql_delay_seconds late).
        built = build_report(slo, StoreSliSource(state.store), start_s, end_s, step,
                             now=time.time() - state.config().settle_seconds)
    except ValueError as exc:
        raise bad_request(f"report of SLO {name!r}: {exc}") from None
    if format == "html":
        # Imported here: it brings matplotlib, which the rest of the service never needs.
        from monitor.slo.report_html import render_html
        return HTMLResponse(render_html(built, ui_url=""))  # the UI is on this server
    return JSONResponse(built.to_dict())
