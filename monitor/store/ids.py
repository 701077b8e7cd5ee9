"""Integer ids of targets, series and histogram bounds, created on first use and cached.

Creation is an INSERT .. ON CONFLICT DO NOTHING followed by a SELECT, so two writers creating
the same series concurrently (collector shards on one PostgreSQL) both end up with one row.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from sqlalchemy import Connection, select
from sqlalchemy.dialects import postgresql, sqlite

from monitor.collect.snapshot import SeriesKey, split_key
from monitor.store.histograms import bounds_digest
from monitor.store.models import Base, HistogramBounds, Series, SeriesKind, Target


def dialect_insert(conn: Connection, model: type[Base]) -> sqlite.Insert | postgresql.Insert:
    """INSERT with ON CONFLICT support for the two dialects the store runs on."""
    if conn.dialect.name == "sqlite":
        return sqlite.insert(model)
    return postgresql.insert(model)


@dataclass
class IdCache:
    """Ids known to exist. Copy before a write transaction and keep the copy only once it
    commits, so ids from a rolled-back transaction are never reused."""

    targets: dict[str, int] = field(default_factory=dict)
    series: dict[SeriesKey, tuple[int, SeriesKind]] = field(default_factory=dict)
    bounds: dict[tuple[float, ...], int] = field(default_factory=dict)
    bounds_by_id: dict[int, tuple[float, ...]] = field(default_factory=dict)

    def copy(self) -> IdCache:
        return IdCache(dict(self.targets), dict(self.series), dict(self.bounds),
                       dict(self.bounds_by_id))

    def adopt(self, committed: IdCache) -> None:
        self.targets, self.series = committed.targets, committed.series
        self.bounds, self.bounds_by_id = committed.bounds, committed.bounds_by_id


def ensure_targets(conn: Connection, ids: IdCache, names: Collection[str]) -> None:
    missing = sorted(set(names) - ids.targets.keys())
    if not missing:
        return
    conn.execute(dialect_insert(conn, Target).on_conflict_do_nothing(index_elements=["name"]),
                 [{"name": name, "labels": {}} for name in missing])
    rows = conn.execute(select(Target.name, Target.id).where(Target.name.in_(missing)))
    ids.targets.update({name: target_id for name, target_id in rows})


def ensure_series(conn: Connection, ids: IdCache, kinds: Mapping[SeriesKey, SeriesKind]) -> None:
    """Ids for these series; a key already stored as another kind is refused."""
    missing = sorted(kinds.keys() - ids.series.keys())
    if missing:
        new_rows = []
        for key in missing:
            name, labels = split_key(key)
            new_rows.append({"key": key, "name": name, "labels": labels, "kind": kinds[key]})
        conn.execute(dialect_insert(conn, Series).on_conflict_do_nothing(index_elements=["key"]),
                     new_rows)
        rows = conn.execute(select(Series.key, Series.id, Series.kind)
                            .where(Series.key.in_(missing)))
        ids.series.update({key: (series_id, SeriesKind(kind)) for key, series_id, kind in rows})
    for key, kind in kinds.items():
        if ids.series[key][1] is not kind:
            raise ValueError(f"series {key} is stored as a {ids.series[key][1]}, "
                             f"cannot write it as a {kind}")


def ensure_bounds(conn: Connection, ids: IdCache, layouts: Collection[tuple[float, ...]]) -> None:
    missing = {bounds_digest(bounds): bounds for bounds in set(layouts) - ids.bounds.keys()}
    if not missing:
        return
    conn.execute(
        dialect_insert(conn, HistogramBounds).on_conflict_do_nothing(index_elements=["digest"]),
        [{"digest": digest, "bounds": list(bounds)} for digest, bounds in missing.items()])
    rows = conn.execute(select(HistogramBounds.digest, HistogramBounds.id)
                        .where(HistogramBounds.digest.in_(missing)))
    for digest, bounds_id in rows:
        ids.bounds[missing[digest]] = bounds_id
        ids.bounds_by_id[bounds_id] = missing[digest]


def load_bounds(conn: Connection, ids: IdCache, bounds_ids: Collection[int] | None = None
                ) -> None:
    """Make ``ids.bounds_by_id`` know these ids, or every stored layout when None (a handful:
    one per bucket layout ever seen)."""
    stmt = select(HistogramBounds.id, HistogramBounds.bounds)
    if bounds_ids is None:
        stmt = stmt.where(HistogramBounds.id.not_in(ids.bounds_by_id))
    else:
        missing = set(bounds_ids) - ids.bounds_by_id.keys()
        if not missing:
            return
        stmt = stmt.where(HistogramBounds.id.in_(missing))
    rows = conn.execute(stmt)
    for bounds_id, bounds in rows:
        ids.bounds_by_id[bounds_id] = tuple(float(b) for b in bounds)
        ids.bounds[ids.bounds_by_id[bounds_id]] = bounds_id
