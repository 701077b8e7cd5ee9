"""The monitor's HTTP API (FastAPI): SLOs and their reports, targets and their series, alerts,
sweeps and canaries; /metrics, /healthz, /readyz; OpenAPI at /openapi.json, docs at /docs."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response

from monitor.api.errors import install_error_handlers
from monitor.api.routers import alerts, health, requests, runs, slos, status, targets
from monitor.api.state import ServiceState

DESCRIPTION = """\
Observability and SLO monitoring for LLM inference. Reads are open; anything that changes
state (starting a sweep or a canary) needs `Authorization: Bearer <token>`. Every error is a
JSON body `{"error": {"status", "code", "message"}}`. Lists are pages: `limit`, `offset`,
`total`. Times are unix seconds; query parameters also take ISO 8601."""


def create_app(state: ServiceState) -> FastAPI:
    app = FastAPI(title="inferwatch", version="0.1.0", description=DESCRIPTION)
    app.state.service = state
    install_error_handlers(app)
    for module in (health, slos, targets, alerts, requests, runs, status):
        app.include_router(module.router)
    # Imported here: the UI's routes import the API's dependencies, so a module-level import
    # would make `import monitor.ui` alone a circular import.
    from monitor.ui.routes import make_router as ui_router
    app.include_router(ui_router())

    @app.middleware("http")
    async def _measure(request: Request,
                       call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        began = time.perf_counter()
        response = await call_next(request)
        route = _route_of(request)
        state.metrics.api_requests.labels(request.method, route,
                                          str(response.status_code)).inc()
        state.metrics.api_duration.labels(route).observe(time.perf_counter() - began)
        return response

    return app


def _route_of(request: Request) -> str:
    """The matched route's template (/api/v1/slos/{name}), never the raw path: bounded
    label values. Starlette records the route in the scope while routing."""
    route = request.scope.get("route")
    path = getattr(route, "path_format", None) or getattr(route, "path", None)
    return str(path) if path else "unmatched"
