"""No interval stored twice: a raw snapshot that overlaps one already stored for its target
is not written. The stored one wins; the refusal is counted and logged.

Two replicas can both hold snapshots of the same moments (an active that lost its lock
connection scrapes on until it notices, within a poll); without this guard their intervals
would both be summed and the same requests counted twice. Writing a snapshot again under its
own key (target, end) is not an overlap: that is the idempotent retry of monitor/store/writes.py.

Cheap by design: each target's latest stored end is cached, and a snapshot that starts at or
after it (every scrape in the normal run of things) is written without a read. The database is
read only when the cache is cold (the first write of a target, after ``forget``) or when a
snapshot reaches back before the cached end.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from sqlalchemy import Connection, func, select

from monitor.collect.snapshot import Snapshot
from monitor.store.ids import IdCache
from monitor.store.models import RAW_RESOLUTION, Interval

logger = logging.getLogger(__name__)

OVERLAP = "overlap"


class OverlapGuard:
    def __init__(self, on_reject: Callable[[str, int], None] | None = None) -> None:
        self.num_rejected = 0
        # Told (reason, count) for each batch with refusals: the service's /metrics.
        self.on_reject = on_reject
        self._ends: dict[str, float] = {}  # target -> latest stored end (committed)
        self._lock = threading.Lock()

    def forget(self) -> None:
        """Drop the cache: another writer may have written since (a replica that becomes
        active must read what the previous active stored)."""
        with self._lock:
            self._ends = {}

    def admit(self, conn: Connection, ids: IdCache, snapshots: Sequence[Snapshot]
              ) -> tuple[list[Snapshot], dict[str, float]]:
        """The snapshots that may be written, and the ends to ``adopt`` once they commit.
        ``ids`` must know every target of ``snapshots``."""
        with self._lock:
            ends = dict(self._ends)
        kept: list[Snapshot] = []
        refused: list[Snapshot] = []
        for s in sorted(snapshots, key=lambda s: (s.target, s.end)):
            target_id = ids.targets[s.target]
            if s.target not in ends:
                latest = conn.execute(select(func.max(Interval.end_time)).where(
                    Interval.target_id == target_id,
                    Interval.resolution == RAW_RESOLUTION)).scalar()
                ends[s.target] = float("-inf") if latest is None else float(latest)
            end = ends[s.target]
            if s.end == end or s.start >= end or not _overlaps(conn, target_id, s):
                kept.append(s)
                ends[s.target] = max(end, s.end)
            else:
                refused.append(s)
        if refused:
            self.num_rejected += len(refused)
            logger.warning("not writing %d snapshots that overlap stored ones (the stored win): "
                           "%s", len(refused),
                           ", ".join(f"{s.target} ({s.start:.3f}, {s.end:.3f}]"
                                     for s in refused[:5]))
            if self.on_reject is not None:
                self.on_reject(OVERLAP, len(refused))
        return kept, ends

    def adopt(self, ends: dict[str, float]) -> None:
        with self._lock:
            self._ends = ends


def _overlaps(conn: Connection, target_id: int, s: Snapshot) -> bool:
    """Whether a stored raw interval other than ``s``'s own key shares time with it."""
    found = conn.execute(select(Interval.end_time).where(
        Interval.target_id == target_id, Interval.resolution == RAW_RESOLUTION,
        Interval.end_time > s.start, Interval.end_time != s.end,
        Interval.start_time < s.end).limit(1)).first()
    return found is not None
