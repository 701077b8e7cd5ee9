"""/healthz (the process answers), /readyz (the store answers and, on the active replica, the
first evaluation ran; a standby that reads the store is ready to serve reads), /metrics (the
monitor's own health in Prometheus' text format)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from monitor.api.deps import StateDep

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is alive")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Ready to answer: store reachable, first evaluation done",
            responses={503: {"description": "not ready; `checks` says what is missing"}})
def readyz(state: StateDep) -> JSONResponse:
    checks: dict[str, Any] = {}
    try:
        with state.store.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        checks["store"] = "ok"
    except Exception as exc:  # any driver error means: not ready
        checks["store"] = f"unreachable: {type(exc).__name__}"
    role = state.replica.role.value if state.replica is not None else None
    # A standby serves reads from the store; the active's evaluation is not its own.
    if state.alerting is not None and role in (None, "active"):
        checks["evaluation"] = "ok" if state.alerting.num_rounds > 0 else "not yet run"
    ready = all(v == "ok" for v in checks.values())
    body: dict[str, Any] = {"status": "ready" if ready else "not_ready", "checks": checks}
    if role is not None:
        body["role"] = role
    if not ready:
        body["error"] = {"status": 503, "code": "not_ready",
                         "message": "; ".join(f"{k}: {v}" for k, v in checks.items()
                                              if v != "ok")}
    return JSONResponse(body, 200 if ready else 503)


@router.get("/metrics", summary="The monitor's own metrics (Prometheus text format)",
            response_class=Response)
def metrics(state: StateDep) -> Response:
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
