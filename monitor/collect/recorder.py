"""The collector's sink into the store, without making the event loop wait on a database.

The collector calls the recorder on its event loop; the recorder only queues the snapshot
(BufferedWriter.submit: a lock and an append). A writer thread flushes every second, and
rolls up and applies retention every minute, riding out database outages with the
BufferedWriter's bound and backoff.

Of several replicas on one store only the active scrapes (monitor/service/leader.py): while
``active`` is False the recorder takes no snapshots and runs no rollup or retention. What it
queued as active is written even after it steps down (``step_down(keep=True)``: an active that
lost the database keeps what it scraped through the outage); the store's overlap guard refuses
any snapshot a new active has already covered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from monitor.collect.config import MonitorConfig
from monitor.collect.snapshot import Snapshot
from monitor.store import BufferedWriter, RetentionPolicy, Store, TargetInfo

logger = logging.getLogger(__name__)


class StoreRecorder:
    def __init__(self, store: Store, writer: BufferedWriter | None = None, *,
                 flush_seconds: float = 1.0, maintenance_seconds: float = 60.0,
                 retention: RetentionPolicy | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.writer = writer or BufferedWriter(store)
        self._flush_seconds = flush_seconds
        self._maintenance_seconds = maintenance_seconds
        self._retention = retention or RetentionPolicy()
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.active = True  # False on a standby replica

    def __call__(self, snapshot: Snapshot) -> None:
        if self.active:
            self.writer.submit(snapshot)

    def step_down(self, *, keep: bool = False) -> int:
        """Take no more snapshots; unless ``keep``, drop what is queued (the new active scrapes
        those moments itself). Returns how many snapshots were dropped."""
        self.active = False
        return 0 if keep else self.writer.discard()

    def register_targets(self, config: MonitorConfig) -> None:
        """Record each target's URL, engine and labels (snapshots name targets only)."""
        for target in config.targets:
            self.store.register_target(TargetInfo(target.name, target.url, target.engine,
                                                  dict(target.labels)))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="store-writer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the thread and write what is queued (if the database answers)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if not self.writer.flush():
            logger.warning("store unreachable at shutdown: %d snapshots not written",
                           self.writer.num_buffered)

    def _run(self) -> None:
        next_maintenance = time.monotonic() + self._maintenance_seconds
        while not self._stop.wait(self._flush_seconds):
            self.writer.flush()  # also what a replica that stepped down kept
            if self.active and time.monotonic() >= next_maintenance:
                next_maintenance = time.monotonic() + self._maintenance_seconds
                self._maintain()

    def _maintain(self) -> None:
        try:
            now = self._clock()
            self.store.rollup(now)
            self.store.apply_retention(now, self._retention)
        except Exception:  # noqa: BLE001 - an outage now is retried at the next round
            logger.exception("rollup or retention failed; retrying in %g s",
                             self._maintenance_seconds)
