"""The run pages: /ui/canaries, /ui/canaries/{id}, /ui/sweeps and /ui/sweeps/{id}, registered
on the UI's router by make_router (monitor/ui/routes.py)."""

from __future__ import annotations

from typing import Any, Protocol

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from monitor.api.deps import StateDep
from monitor.ui import fmt, run_views


class Page(Protocol):
    def __call__(self, template: str, status_code: int = 200, **context: Any
                 ) -> HTMLResponse: ...


def register_runs(router: APIRouter, page: Page) -> None:
    """Add the run pages to ``router``; ``page`` renders a template (404: not_found.html)."""

    def missing(what: str, run_id: str) -> HTMLResponse:
        return page("not_found.html", 404, title="Not found", what=f"{what} {run_id!r}")

    @router.get("/ui/canaries", response_class=HTMLResponse)
    def canary_list(state: StateDep) -> HTMLResponse:
        return page("canaries.html", title="Canaries", fmt=fmt,
                    listing=run_views.run_list(state, "canary"),
                    mode=run_views.canary_mode, compared=run_views.compared)

    @router.get("/ui/canaries/{run_id}", response_class=HTMLResponse)
    def canary_page(state: StateDep, run_id: str) -> HTMLResponse:
        run = run_views.run_of(state, "canary", run_id)
        if run is None:
            return missing("canary", run_id)
        return page("canary.html", title=f"Canary {run.name}", fmt=fmt,
                    view=run_views.canary_view(run),
                    config=run_views.config_rows(run.config))

    @router.get("/ui/sweeps", response_class=HTMLResponse)
    def sweep_list(state: StateDep) -> HTMLResponse:
        return page("sweeps.html", title="Sweeps", fmt=fmt,
                    listing=run_views.run_list(state, "sweep"))

    @router.get("/ui/sweeps/{run_id}", response_class=HTMLResponse)
    def sweep_page(state: StateDep, run_id: str) -> HTMLResponse:
        run = run_views.run_of(state, "sweep", run_id)
        if run is None:
            return missing("sweep", run_id)
        return page("sweep.html", title=f"Sweep {run.name}", fmt=fmt,
                    view=run_views.sweep_view(run), latency=run_views.latency,
                    config=run_views.config_rows(run.config))
