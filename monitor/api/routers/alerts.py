"""/api/v1/alerts: the alert book (SLO burn rates, no data, anomalies) as the monitor holds it."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query

from monitor.api.convert import alert_out
from monitor.api.deps import Limit, Offset, StateDep
from monitor.api.schemas import AlertOut, Page

router = APIRouter(prefix="/api/v1/alerts", tags=["alerts"])


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
