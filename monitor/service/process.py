"""`inferwatch serve`'s process: the collector, the SLO and anomaly evaluation with alerting,
and the HTTP API, on one event loop.

Replicas: several `inferwatch serve` processes may share one store, PostgreSQL or a SQLite
file; one is active (monitor/service/leader.py: an advisory lock; on SQLite file_leader.py: a
file lock, one writer per store) and alone scrapes, evaluates, sends alerts, rolls up and
runs sweeps and canaries. The others are standbys serving reads: they re-read the alert book
from the store every poll and evaluate the SLOs read-only every evaluation interval (statuses
for the API and /metrics, nothing written, nothing sent). On promotion a replica re-reads the
alert book, fails the runs a dead active left ``running``, starts a collector (each target's
first scrape is FIRST: the time between the old active's last snapshot and the new one's
first is missing data, never invented) and the evaluation loop, and sends every announced alert
at once (Alertmanager deduplicates identical ones: no page lost, none repeated). On stepping
down it stops evaluating and drops its undelivered alerts at once; its collector scrapes on
while it HOLDS (the database away, leader.py), and what it queued is written once the
database answers (the store's overlap guard refuses what a new active also covers).

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
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn

from exporters.sockets import bind_socket
from monitor.alerting.delivery import AlertDelivery
from monitor.alerting.loop import AlertingLoop
from monitor.api import ServiceState, create_app
from monitor.api.health import MonitorMetrics, ScrapeObserver, SloCollector
from monitor.api.runs import RunManager
from monitor.service.evaluation import evaluation_loop
from monitor.collect.collector import Collector, follow_config
from monitor.collect.config import ConfigWatcher
from monitor.headroom.metrics import HeadroomCollector
from monitor.collect.recorder import StoreRecorder
from monitor.service.leader import Leadership, Replica, Role, replica_for
from monitor.service.reload import LiveConfig, SloFiles
from monitor.slo.spec import Slo
from monitor.store import Store
from monitor.store.fence import install_fence
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
        self.alerting.book.may_save = lambda: self.replica.role is Role.ACTIVE
        self.metrics.registry.register(SloCollector(self.alerting))
        if self.alerting.headroom is not None:
            self.metrics.registry.register(HeadroomCollector(self.alerting.headroom))
        self.scrapes = ScrapeObserver(self.recorder, self.metrics)
        config = watcher.config
        self.replica: Replica = replica_for(
            store.engine.url.render_as_string(hide_password=False),
            replica_id=config.ha.replica_id, poll_seconds=config.ha.poll_seconds,
            on_change=self._role_changed)
        self.metrics.observe_role(self.replica.role.value, changed=False)
        if isinstance(self.replica, Leadership):  # monitor/store/fence.py
            install_fence(store.engine, self.replica.check_fence)
        store.overlaps.on_reject = self.metrics.observe_rejected
        self._alertmanager_urls = config.alerting.alertmanager_urls  # read at start only
        self._taken_over = False  # the active's start (below) is done: runs may start
        # The collector and the event that stops it; it outlives a term ended by a lost
        # database (the replica is then HOLDING, monitor/service/leader.py).
        self._collecting: tuple[asyncio.Event, asyncio.Task[None]] | None = None
        self._terms = 0  # times this replica became active
        self.runs = RunManager(store.engine, refuse=self._refuse_runs)
        self.live = LiveConfig(watcher, self.alerting, self.recorder, slo_files=slo_files,
                               on_result=self.metrics.observe_reload, on_slos=self._set_slos)
        self.reloader = self.live.reloader
        self.state = ServiceState(store, lambda: self.watcher.config, slos, self.metrics,
                                  self.scrapes, self.runs, self.alerting, settings.token,
                                  reloader=self.reloader, replica=self.replica)
        self.app = create_app(self.state)

    def _role_changed(self, role: Role) -> None:
        self.metrics.observe_role(role.value)
        if role is Role.STANDBY and self.alerting.delivery is not None:
            # Called as the lock is found lost, on the event loop: no alert is sent from now
            # on, not even the queued ones (the new active announces them all again).
            dropped = self.alerting.delivery.abandon()
            if dropped:
                logger.warning("stepped down: %d undelivered alerts left to the new active",
                               dropped)

    def reload_in_background(self, trigger: str) -> None:
        """Start a reload (SIGHUP); its outcome is logged, on the API and on /metrics."""
        self.live.reload_in_background(trigger)

    def _set_slos(self, slos: list[Slo]) -> None:
        self.state.slos = slos

    def bind(self) -> socket.socket:
        return bind_socket(self.settings.host, self.settings.port)

    async def run(self, stop: asyncio.Event, sock: socket.socket | None,
                  on_listening: Callable[[str], None] | None = None) -> None:
        """Serve until ``stop`` is set; the recorder is started and stopped by the caller.
        Without ``sock``, no API: the replica's duties only (`inferwatch collect`)."""
        self.recorder.active = self.replica.role is Role.ACTIVE
        server: _Server | None = None
        serving: asyncio.Task[None] | None = None
        if sock is not None:
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
        # The lock is given up only once the active's duties have stopped (its last alert
        # round saved and sent): a standby taking over then starts from the final state.
        release = asyncio.Event()

        async def roles() -> None:
            try:
                await self._follow_role(stop)
            finally:
                release.set()

        try:
            await asyncio.gather(self.replica.run(release), roles())
        finally:
            await self.runs.aclose()
            if server is not None and serving is not None:
                server.should_exit = True
                await serving

    async def _follow_role(self, stop: asyncio.Event) -> None:
        """The active's duties while active, the standby's while standby, until ``stop``."""
        while not stop.is_set():
            await _while_not(self.replica.became_active, stop, self._standby)
            if stop.is_set():
                break
            await _while_not(self.replica.became_standby, stop,
                             lambda done: self._active(done, stop))

    async def _active(self, done: asyncio.Event, stop: asyncio.Event) -> None:
        while True:
            try:
                await asyncio.to_thread(self._take_over)
                break
            except Exception:  # the store away just as we won the lock: try again
                logger.exception("cannot take over yet; retrying")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), self.replica.poll_seconds)
            if done.is_set():
                return
        self.recorder.active = True
        if self._terms and self._alertmanager_urls:  # the last term's closed with its loop
            self.alerting.delivery = AlertDelivery(self._alertmanager_urls)
        self._terms += 1
        self._start_collecting()  # or go on with the one that scraped through an outage
        try:
            await self.alerting.run(done)
        finally:
            self._taken_over = False
            await self.runs.aclose()
            if stop.is_set() or not self.replica.holding:
                await self._stop_collecting(keep=stop.is_set())
            else:
                logger.warning("lost the database: scraping on into the buffer (%d queued) "
                               "until it answers", self.recorder.writer.num_buffered)

    def _start_collecting(self) -> None:
        if self._collecting is not None:
            return
        done = asyncio.Event()
        collector = self.live.collector = Collector(self.watcher.config, self.scrapes)
        self._collecting = done, asyncio.create_task(self._collect(collector, done))

    async def _collect(self, collector: Collector, done: asyncio.Event) -> None:
        try:
            await asyncio.gather(
                collector.run(done),
                follow_config(self.watcher, collector, done,
                              on_change=self.recorder.register_targets))
        finally:
            await collector.aclose()

    async def _stop_collecting(self, *, keep: bool) -> None:
        """Stop the collector; ``keep`` its queued snapshots (written when the database
        answers) or drop them (a step-down with the database up: the new active scrapes)."""
        if self._collecting is not None:
            done, task = self._collecting
            self._collecting = None
            done.set()
            try:
                await task
            finally:
                self.live.collector = None
        dropped = self.recorder.step_down(keep=keep)
        if dropped:
            logger.warning("stepped down: collector, evaluation and runs stopped; %d queued "
                           "snapshots dropped", dropped)

    def _take_over(self) -> None:
        """What a replica does as it becomes active (blocking): it trusts only the store."""
        self.store.overlaps.forget()  # the previous active wrote since
        self.alerting.book.reload()
        self.alerting.book.announce_all()
        stale = fail_unfinished(self.store.engine, "the monitor stopped during the run")
        if stale:
            logger.warning("%d runs were left running by a previous monitor; marked failed",
                           stale)
        self._taken_over = True

    async def _standby(self, done: asyncio.Event) -> None:
        """Follow the active: its alert book every poll, SLO and headroom statuses read-only
        every evaluation interval (anomalies reach a standby as the active's alerts)."""
        self.recorder.active = self._collecting is not None
        next_evaluation, unreadable = 0.0, False
        while not done.is_set():
            if self._collecting is not None and not self.replica.holding:
                # The database answered and another replica holds the lock: what was scraped
                # through the outage is written (the overlap guard refuses what it covers).
                await self._stop_collecting(keep=True)
                logger.warning("the database is back and another replica is active; %d "
                               "snapshots of the outage to write",
                               self.recorder.writer.num_buffered)
            now = time.time()
            evaluate = now >= next_evaluation
            if evaluate:
                next_evaluation = now + self.alerting.interval_seconds
            try:
                await asyncio.to_thread(self._follow_active, now, evaluate)
            except Exception:  # the store may be away: the next poll tries again
                # Once per outage at WARNING, not every poll.
                logger.log(logging.DEBUG if unreadable else logging.WARNING,
                           "standby: cannot read the store", exc_info=True)
                unreadable = True
            else:
                if unreadable:
                    logger.warning("standby: the store answers again")
                unreadable = False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), self.replica.poll_seconds)

    def _follow_active(self, now: float, evaluate: bool) -> None:
        self.alerting.book.reload()
        if not evaluate:
            return
        if self.alerting.evaluator is not None:
            self.alerting.statuses = self.alerting.evaluator.tick(now)
        self.alerting.follow(now)  # headroom statuses, read-only

    def _refuse_runs(self) -> str | None:
        """Why this replica cannot start a sweep or canary now (None: it can)."""
        if self.replica.role is Role.ACTIVE:
            # Before the take-over, a new run would be failed as one the last active left.
            return None if self._taken_over else (
                f"replica {self.replica.replica_id} is becoming active: try again in a moment")
        active = self.replica.active_replica()
        where = f"the active replica {active}" if active else "the active replica (none now)"
        return (f"replica {self.replica.replica_id} is a standby: start runs on {where}")


async def _while_not(event: asyncio.Event, stop: asyncio.Event,
                     duty: Callable[[asyncio.Event], Coroutine[Any, Any, None]]) -> None:
    """Run ``duty(done)`` until ``event`` or ``stop`` is set, then set ``done`` and wait for
    it to finish."""
    if event.is_set() or stop.is_set():
        return
    done = asyncio.Event()
    work = asyncio.create_task(duty(done))
    waits = [asyncio.create_task(event.wait()), asyncio.create_task(stop.wait())]
    try:
        await asyncio.wait([work, *waits], return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
        done.set()
        await work  # raises what the duty raised
