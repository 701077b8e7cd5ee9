"""/api/v1/alerts: the alert book (SLO burn rates, no data, anomalies) as the monitor holds it,
and the alert history (every change of state, as stored)."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query

from monitor.api.convert import alert_event_out, alert_out
from monitor.api.deps import Limit, Offset, StateDep
from monitor.api.errors import bad_request
from monitor.api.schemas import AlertEventOut, AlertOut, ErrorBody, Page
from monitor.api.timeparse import parse_time
from monitor.store.alert_events import EventFilter, read_events

router = APIRouter(prefix="/api/v1/alerts", tags=["alerts"])

_BAD_REQUEST: dict[int | str, dict[str, Any]] = {400: {"model": ErrorBody}}
_NO_NUL = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL: refused (422), not a 500


@router.get("", response_model=Page[AlertOut], summary="Alerts pending, firing or resolved")
def list_alerts(state: StateDep, limit: Limit = 100, offset: Offset = 0,
                alert_state: Annotated[Literal["pending", "firing", "resolved"] | None,
                                       Query(alias="state")] = None,
                alertname: str | None = None) -> Page[AlertOut]:
    alerts = state.alerting.book.alerts() if state.alerting is not None else []
    chosen = [a for a in alerts if (alert_state is None or a.state.value == alert_state)
              and (alertname is None or a.name == alertname)]
    return Page(items=[alert_out(a) for a in chosen[offset:offset + limit]],
                total=len(chosen), limit=limit, offset=offset)


def history_filter(slo: str | None, alertname: str | None, start: str | None,
                   end: str | None) -> EventFilter:
    """The filter of a history query; times as the other routes parse them (400 if bad)."""
    start_s = None if not start else parse_time(start, "start", 0.0)
    end_s = None if not end else parse_time(end, "end", time.time())
    if start_s is not None and end_s is not None and end_s <= start_s:
        raise bad_request(f"the range is empty: end ({end_s:.0f}) is not after start "
                          f"({start_s:.0f})")
    return EventFilter(slo=slo, alertname=alertname, start=start_s, end=end_s)


# A fixed path: declared before any /api/v1/alerts/{...} route, so it is never taken for one.
@router.get("/history", response_model=Page[AlertEventOut], responses=_BAD_REQUEST,
            summary="Alert history: each change of state, newest first")
def alert_history(state: StateDep, limit: Limit = 100, offset: Offset = 0,
                  slo: Annotated[str | None, Query(max_length=200, pattern=_NO_NUL,
                                                   description="the alerts' slo label")] = None,
                  alertname: Annotated[str | None, Query(max_length=200, pattern=_NO_NUL)]
                  = None,
                  start: Annotated[str | None, Query(description="unix seconds or ISO 8601; "
                                                                 "events at or after it")]
                  = None,
                  end: Annotated[str | None, Query(description="events before it")] = None,
                  ) -> Page[AlertEventOut]:
    where = history_filter(slo, alertname, start, end)
    rows, total = read_events(state.store.engine, where, limit, offset)
    return Page(items=[alert_event_out(r) for r in rows], total=total, limit=limit,
                offset=offset)
