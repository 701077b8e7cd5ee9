"""The UI's routes: HTML pages at /, /ui/slos, /ui/slos/{name}, /ui/alerts and the stylesheet
and script they load from the package (nothing from a CDN)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from importlib import resources
from typing import Any, Final

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape

from monitor.api.deps import StateDep
from monitor.api.state import ServiceState
from monitor.slo.spec import Slo
from monitor.ui import fmt, history, listing, svg, views
from monitor.ui import silences as silence_pages
from monitor.ui.runs import register_runs

logger = logging.getLogger(__name__)

STATIC: Final[dict[str, str]] = {"ui.css": "text/css", "ui.js": "text/javascript"}


def make_environment() -> Environment:
    env = Environment(loader=PackageLoader("monitor.ui", "templates"),
                      autoescape=select_autoescape(["html"]))
    env.globals.update(percent=fmt.percent, rate=fmt.rate, number=fmt.number,
                       millis=fmt.millis, when=fmt.when, duration=fmt.duration,
                       budget_basis=fmt.budget_basis)
    return env


def _plots(state: ServiceState, name: str) -> dict[str, str]:
    """The burn-down and the SLI from the SLO's first event in its period, from its report,
    with the span they draw ("caption") and, for a history younger than the period, the
    ``start`` of the report linked (where the charts start)."""
    drawn = views.period_series(state, name, time.time())
    if isinstance(drawn, str):
        return {"error": drawn}
    series, span = drawn.series, drawn.span
    x_range = (span.start, span.end)
    return {"burn_down": svg.line_plot(list(zip(series.end, series.budget_remaining)),
                                       "budget remaining", x_range=x_range),
            "sli": svg.line_plot(list(zip(series.end, series.sli)), "SLI", x_range=x_range),
            "caption": _caption(drawn, state.slo(name)),
            "start": f"{span.start:.0f}" if span.partial else ""}


def _caption(drawn: views.PeriodSeries, slo: Slo | None) -> str:
    """What span the charts draw: "10m 00s from the first event (of the 30d period), ..."."""
    span = drawn.span
    period = f"the {slo.window} period" if slo is not None else "the period"
    where = (f"from the first event, {fmt.when(span.start)} (the history seen so far of "
             f"{period})" if span.partial else f"over {period}, from {fmt.when(span.start)}")
    return (f"{fmt.duration(span.seconds)} {where} to {fmt.when(span.end)}, in "
            f"{len(drawn.series.end)} steps of {fmt.duration(drawn.step_seconds)}")


# A sparkline costs a period's report (0.25-0.7 s for 30 days): the list draws them for its
# first SPARKLINES SLOs only, off the request path. A load waits at most SPARKLINE_WAIT_SECONDS
# for those not drawn yet (a worker thread draws them; "…" until then, in the next load), and
# each is kept SPARKLINE_SECONDS, an older one shown while it is redrawn. So a list of 1,000
# SLOs loads in the time of its table even when nothing is cached (bench/ui_load.py).
SPARKLINES = 50
SPARKLINE_SECONDS = 300.0
SPARKLINE_WAIT_SECONDS = 0.5
PENDING = "…"


class _Sparklines:
    def __init__(self) -> None:
        self._cache: dict[str, tuple[float, str]] = {}
        self._pending: dict[str, threading.Event] = {}  # queued or being drawn
        self._queue: queue.SimpleQueue[tuple[ServiceState, str]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None

    def __call__(self, state: ServiceState) -> dict[str, str]:
        """Each SLO's budget over its period ("" without two points, PENDING while drawn)."""
        now, wanted = time.time(), [slo.name for slo in state.slos[:SPARKLINES]]
        with self._lock:
            for name in wanted:
                cached = self._cache.get(name)
                if (cached is None or now - cached[0] > SPARKLINE_SECONDS) \
                        and name not in self._pending:
                    self._pending[name] = threading.Event()
                    self._queue.put((state, name))
            if self._pending and self._worker is None:
                # A daemon: a process that stops does not wait for lines nobody will see.
                self._worker = threading.Thread(target=self._run, name="ui-sparklines",
                                                daemon=True)
                self._worker.start()
            drawing = list(self._pending.values())
        deadline = time.monotonic() + SPARKLINE_WAIT_SECONDS
        for done in drawing:
            if not done.wait(max(0.0, deadline - time.monotonic())):
                break
        with self._lock:
            return {name: self._cache[name][1] if name in self._cache else PENDING
                    for name in wanted}

    def _run(self) -> None:
        while True:
            state, name = self._queue.get()
            self._draw(state, name)

    def _draw(self, state: ServiceState, name: str) -> None:
        now = time.time()
        try:
            drawn = views.period_series(state, name, now)
            line = "" if isinstance(drawn, str) else svg.sparkline(
                list(zip(drawn.series.end, drawn.series.budget_remaining)),
                title=f"budget remaining: {_caption(drawn, state.slo(name))}")
        except Exception:  # a store hiccup: no line this time, the next load tries again
            logger.warning("sparkline of SLO %s failed", name, exc_info=True)
            line = ""
        with self._lock:
            self._cache[name] = (now, line)
            self._pending.pop(name).set()


def make_router() -> APIRouter:
    env = make_environment()
    router = APIRouter(include_in_schema=False)
    sparklines = _Sparklines()

    def page(template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(template).render(**context),
                            status_code=status_code)

    register_runs(router, page)   # the canary and sweep pages (monitor/ui/runs.py)

    @router.get("/", response_class=HTMLResponse)
    def overview(state: StateDep) -> HTMLResponse:
        return page("overview.html", title="Overview", view=views.overview(state))

    @router.get("/ui/slos", response_class=HTMLResponse)
    def slo_list(state: StateDep, query: listing.QueryDep) -> HTMLResponse:
        return page("slos.html", title="SLOs", sparklines=sparklines(state),
                    **listing.context(state, query))

    @router.get("/ui/slos/{name}", response_class=HTMLResponse)
    def slo_page(state: StateDep, name: str) -> HTMLResponse:
        detail = views.slo_detail(state, name)
        if detail is None:
            return page("not_found.html", 404, title="Not found", what=f"SLO {name!r}")
        urls = state.config().alerting.alertmanager_urls
        return page("slo.html", title=f"SLO {name}", detail=detail,
                    plots=_plots(state, name), alertmanager=urls[0] if urls else None)

    @router.get("/ui/alerts", response_class=HTMLResponse)
    def alert_list(state: StateDep) -> HTMLResponse:
        return page("alerts.html", title="Alerts", alerts=views.alerts(state),
                    recent=history.recent(state))

    silence_pages.add_routes(router, page)

    @router.get("/ui/static/{name}")
    def static(name: str) -> Response:
        if name not in STATIC:
            return page("not_found.html", 404, title="Not found", what=f"file {name!r}")
        body = resources.files("monitor.ui").joinpath("static", name).read_bytes()
        return Response(body, media_type=STATIC[name])

    return router
