"""An API over a real store (SQLite in a temp dir) with known data, served by uvicorn on a
port-0 socket: two targets scraped every 15 s for the last 40 minutes, 10 requests per scrape,
``ref-0`` failing 1 of them with a timeout, ``ref-1`` none; and alert history before the one
evaluation (``past_incident``)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from monitor.api import ServiceState, create_app
from monitor.api.health import MonitorMetrics, ScrapeObserver, SloCollector
from monitor.api.runs import RunManager
from monitor.collect.config import MonitorConfig, parse_config
from monitor.service.evaluation import evaluation_loop
from monitor.slo.evaluator import AlertCondition
from monitor.slo.loaders import load_slos
from monitor.slo.windows import BurnWindow, alert_labels, burn_alert, burn_windows
from monitor.store import Store, open_store
from monitor.store.db import TargetInfo
from tests.asgi_thread import serving
from tests.monitor.store.builders import SCRAPE_SECONDS, up

TOKEN = "test-token-0123456789"
DASHBOARD_URL = "/grafana/d/inferwatch-slo?var-slo=availability"  # relative: no outside URL
SLOS = """
slos:
  - name: availability
    description: 99.9% of requests finish without a timeout <script>alert(1)</script>
    sli: {kind: availability, errors: [timeout]}
    objective: 0.999
    window: 1d
    alerting: {min_events: 10}
  - name: ttft
    sli: {kind: latency, metric: ttft, threshold_seconds: 250ms}
    objective: 0.5
    window: 30d
"""
CONFIG = """
store: {url: "sqlite:///unused.db"}
anomaly: {enabled: false}
targets:
  - {name: ref-0, url: "http://127.0.0.1:9/metrics", labels: {model: tiny}}
  - {name: ref-1, url: "http://127.0.0.1:9/metrics", labels: {model: tiny}}
"""


@dataclass
class Api:
    url: str
    state: ServiceState
    now: float


def fill(store: Store, now: float) -> None:
    end = math.floor(now / 60) * 60 - 60   # whole minutes, settled
    ends = [end - k * SCRAPE_SECONDS for k in range(160)][::-1]
    store.write([up("ref-0", t, requests=10, errors=1) for t in ends]
                + [up("ref-1", t, requests=10, errors=0) for t in ends])


def past_incident(state: ServiceState, now: float) -> None:
    """Alert history before the evaluation at ``now``, through the loop's own book: the
    availability SLO's first burn window fired 30 minutes ago and resolved 20 minutes ago (its
    annotations with a dashboard link), its last window went pending 25 minutes ago and
    stopped holding a minute later. The evaluation at ``now`` fires the first window again."""
    slo = state.slo("availability")
    if slo is None:  # a test's own SLOs: no past incident
        return
    assert state.alerting is not None
    windows = burn_windows(slo)

    def condition(window: BurnWindow, active: bool, for_seconds: float) -> AlertCondition:
        author = burn_alert(slo, window)
        labels = {**alert_labels(slo, window.severity.value, window.name, author.labels),
                  "alertname": author.name}
        return AlertCondition(labels, {"summary": "past incident",
                                       "dashboard_url": DASHBOARD_URL},
                              active, for_seconds, 60.0 if active else 0.5)

    first, last = windows[0], windows[-1]
    book = state.alerting.book
    book.update(now - 1800, [condition(first, True, 0)])
    book.update(now - 1500, [condition(first, True, 0), condition(last, True, 600)])
    book.update(now - 1440, [condition(first, True, 0), condition(last, False, 600)])
    book.update(now - 1200, [condition(first, False, 0)])


def build_state(tmp_path: Path, token: str | None, slos_yaml: str = SLOS,
                config_yaml: str = CONFIG) -> ServiceState:
    (tmp_path / "slos.yaml").write_text(slos_yaml)
    slos = load_slos(tmp_path / "slos.yaml")
    config: MonitorConfig = parse_config(config_yaml, "inferwatch.yaml")
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    store.migrate()
    for target in config.targets:
        store.register_target(TargetInfo(target.name, target.url, target.engine,
                                         dict(target.labels)))
    metrics = MonitorMetrics()
    loop = evaluation_loop(config, store, slos)
    metrics.registry.register(SloCollector(loop))
    scrapes = ScrapeObserver(lambda _s: None, metrics)
    return ServiceState(store, lambda: config, slos, metrics, scrapes,
                        RunManager(store.engine), loop, token)


@contextmanager
def served_api(tmp_path: Path, slos_yaml: str = SLOS, config_yaml: str = CONFIG
               ) -> Iterator[Api]:
    """The API over the filled store, evaluated once, on a port-0 uvicorn server (other SLOs
    or another config for a test that needs them)."""
    state = build_state(tmp_path, TOKEN, slos_yaml, config_yaml)
    now = time.time()
    fill(state.store, now)
    assert state.alerting is not None
    past_incident(state, now)
    state.alerting.evaluate(now)
    with serving(create_app(state)) as url:
        yield Api(url, state, now)
    state.store.close()


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with served_api(tmp_path) as served:
        yield served
