"""Keeping snapshots through a database outage.

The collector submits each snapshot and flushes once per scrape round. While the database is
unreachable, snapshots wait in memory (oldest dropped past ``max_buffered``, counted in
``num_dropped``) and flushes retry with exponential backoff; when the database answers again
everything kept is written, in order. Writes are idempotent, so a batch that committed just
before a connection broke is harmless to write again. A snapshot the store refuses outright
is logged and counted in ``num_rejected`` instead of blocking the ones behind it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from monitor.collect.snapshot import Snapshot

logger = logging.getLogger(__name__)


class SnapshotSink(Protocol):
    def write(self, snapshots: Sequence[Snapshot]) -> None: ...


def is_outage(error: Exception) -> bool:
    """A database that cannot be reached or is busy, as opposed to a bug or bad data."""
    if isinstance(error, (OperationalError, InterfaceError)):
        return True
    return isinstance(error, DBAPIError) and error.connection_invalidated


class BufferedWriter:
    def __init__(self, store: SnapshotSink, *, max_buffered: int = 10_000,
                 max_batch: int = 500, initial_backoff_seconds: float = 1.0,
                 max_backoff_seconds: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if max_buffered < 1 or max_batch < 1:
            raise ValueError(f"max_buffered and max_batch must be >= 1, "
                             f"got {max_buffered}, {max_batch}")
        self.max_buffered = max_buffered
        self.num_dropped = 0   # past max_buffered during an outage, oldest first
        self.num_rejected = 0  # refused by the store for a reason other than an outage
        self._store = store
        self._max_batch = max_batch
        self._initial_backoff, self._max_backoff = initial_backoff_seconds, max_backoff_seconds
        self._clock = clock
        self._buffer: deque[Snapshot] = deque()
        self._lock = threading.Lock()        # guards the buffer and the counters
        self._flush_lock = threading.Lock()  # one flush at a time; submit never waits on it
        self._backoff = 0.0                  # 0 while the database is reachable
        self._next_attempt = -float("inf")
        self._dropped_at_outage_start = 0

    @property
    def num_buffered(self) -> int:
        return len(self._buffer)

    @property
    def in_outage(self) -> bool:
        return self._backoff > 0

    def submit(self, snapshot: Snapshot) -> None:
        with self._lock:
            self._buffer.append(snapshot)
            self._drop_past_bound()

    def discard(self) -> int:
        """Forget what is queued (a replica that stepped down: the new active scrapes those
        moments itself); returns how many snapshots."""
        with self._lock:
            dropped = len(self._buffer)
            self._buffer.clear()
        return dropped

    def flush(self) -> bool:
        """Write what is buffered; True when the buffer is empty afterwards. During an outage
        this returns at once until the backoff delay has passed, then tries again."""
        with self._flush_lock:
            if self._clock() < self._next_attempt:
                return False
            while True:
                with self._lock:
                    batch = [self._buffer.popleft()
                             for _ in range(min(self._max_batch, len(self._buffer)))]
                if not batch:
                    break
                if not self._write(batch):
                    return False
            self._end_outage()
            return True

    def _write(self, batch: list[Snapshot]) -> bool:
        """False (batch kept) on an outage."""
        try:
            self._store.write(batch)
            return True
        except Exception as error:
            if is_outage(error):
                self._put_back(batch)
                self._start_or_extend_outage(error)
                return False
        return self._write_each(batch)

    def _write_each(self, batch: list[Snapshot]) -> bool:
        """The store refused the batch for a reason other than an outage (a series that
        changed kind): write one by one, logging and counting the refused snapshots, so one
        bad snapshot cannot hold up the rest forever."""
        for i, snapshot in enumerate(batch):
            try:
                self._store.write([snapshot])
            except Exception as error:
                if is_outage(error):
                    self._put_back(batch[i:])
                    self._start_or_extend_outage(error)
                    return False
                self.num_rejected += 1
                logger.error("store refused the snapshot of %s ending at %s: %s",
                             snapshot.target, snapshot.end, error)
        return True

    def _put_back(self, batch: list[Snapshot]) -> None:
        with self._lock:
            self._buffer.extendleft(reversed(batch))
            self._drop_past_bound()

    def _drop_past_bound(self) -> None:
        while len(self._buffer) > self.max_buffered:
            self._buffer.popleft()
            self.num_dropped += 1

    def _start_or_extend_outage(self, error: Exception) -> None:
        if self._backoff == 0:
            self._dropped_at_outage_start = self.num_dropped
            logger.warning("store unreachable, buffering up to %d snapshots in memory: %s",
                           self.max_buffered, error)
            self._backoff = self._initial_backoff
        else:
            self._backoff = min(self._backoff * 2, self._max_backoff)
        self._next_attempt = self._clock() + self._backoff

    def _end_outage(self) -> None:
        if self._backoff == 0:
            return
        logger.info("store reachable again; %d snapshots dropped during the outage",
                    self.num_dropped - self._dropped_at_outage_start)
        self._backoff, self._next_attempt = 0.0, -float("inf")
