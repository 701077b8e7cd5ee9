"""`inferwatch serve`'s process: the collector, the SLO and anomaly evaluation with alerting,
and the HTTP API, on one event loop.

The API is uvicorn on a socket bound before start (port 0 picks a free one). Signals are the
service's, not uvicorn's: SIGINT/SIGTERM set one stop event, and everything winds down from it
(runs in flight are recorded as cancelled, queued snapshots written, undelivered alerts kept
in the store for the next start). SIGHUP, like ``POST /-/reload``, reloads inferwatch.yaml
and its SLO files (monitor/service/reload.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import uvicorn

from exporters.sockets import bind_socket
from monitor.alerting.loop import AlertingLoop
from monitor.api import ServiceState, create_app
from monitor.api.health import MonitorMetrics, ScrapeObserver, SloCollector
from monitor.api.runs import RunManager
from monitor.service.evaluation import evaluation_loop
from monitor.collect.collector import Collector, follow_config
from monitor.collect.config import ConfigWatcher
from monitor.headroom.metrics import HeadroomCollector
from monitor.collect.recorder import StoreRecorder
from monitor.service.reload import LiveConfig, SloFiles
from monitor.slo.spec import Slo
from monitor.store import Store
from monitor.store.runs import fail_unfinished

logger = logging.getLogger(__name__)

LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True, slots=True)
class ServeSettings:
    """Where the API listens and who may change things; refuses an unsafe combination."""

    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port {self.port}: give 0..65535")
        if self.token is not None and len(self.token) < 16:
            raise ValueError("the API token must be at least 16 characters")
        if self.host not in LOOPBACK and self.token is None:
            raise ValueError(f"refusing to listen on {self.host} without a token: give --token "
                             "(or INFERWATCH_API_TOKEN), or keep the default 127.0.0.1")


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers: the service's stop event rules."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class MonitorService:
    def __init__(self, watcher: ConfigWatcher, slos: list[Slo], store: Store,
                 settings: ServeSettings, slo_files: SloFiles | None = None) -> None:
        self.watcher = watcher
        self.store = store
        self.settings = settings
        self.metrics = MonitorMetrics()
        self.recorder = StoreRecorder(store)
        self.recorder.register_targets(watcher.config)
        # Always an alerting loop and an evaluator, even without SLOs: a reload may add some.
        self.alerting: AlertingLoop = evaluation_loop(watcher.config, store, slos,
                                                    lambda: self.watcher.config)
        self.alerting.on_round = self.metrics.observe_round
        self.metrics.registry.register(SloCollector(self.alerting))
        if self.alerting.headroom is not None:
            self.metrics.registry.register(HeadroomCollector(self.alerting.headroom))
        self.scrapes = ScrapeObserver(self.recorder, self.metrics)
        self.runs = RunManager(store.engine)
        self.live = LiveConfig(watcher, self.alerting, self.recorder, slo_files=slo_files,
                               on_result=self.metrics.observe_reload, on_slos=self._set_slos)
        self.reloader = self.live.reloader
        self.state = ServiceState(store, lambda: self.watcher.config, slos, self.metrics,
                                  self.scrapes, self.runs, self.alerting, settings.token,
                                  reloader=self.reloader)
        self.app = create_app(self.state)

    def reload_in_background(self, trigger: str) -> None:
        """Start a reload (SIGHUP); its outcome is logged, on the API and on /metrics."""
        self.live.reload_in_background(trigger)

    def _set_slos(self, slos: list[Slo]) -> None:
        self.state.slos = slos

    def bind(self) -> socket.socket:
        return bind_socket(self.settings.host, self.settings.port)

    async def run(self, stop: asyncio.Event, sock: socket.socket,
                  on_listening: Callable[[str], None] | None = None) -> None:
        """Serve until ``stop`` is set; the recorder is started and stopped by the caller."""
        stale = await asyncio.to_thread(fail_unfinished, self.store.engine,
                                        "the monitor stopped during the run")
        if stale:
            logger.warning("%d runs were left running by a previous monitor; marked failed",
                           stale)
        server = _Server(uvicorn.Config(self.app, log_level="warning", access_log=False,
                                        lifespan="off"))
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        if serving.done():
            serving.result()  # raises what stopped uvicorn
        host, port = sock.getsockname()[:2]
        if on_listening is not None:
            on_listening(f"http://{host if ':' not in host else f'[{host}]'}:{port}")
        collector = self.live.collector = Collector(self.watcher.config, self.scrapes)
        tasks = [collector.run(stop), follow_config(self.watcher, collector, stop,
                                                    on_change=self.recorder.register_targets),
                 self.alerting.run(stop)]
        try:
            await asyncio.gather(*tasks)
        finally:
            self.live.collector = None
            await self.runs.aclose()
            server.should_exit = True
            await serving
