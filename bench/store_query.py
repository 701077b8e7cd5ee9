"""Query time for a 30-day window over 1-minute rollups for 100 targets.

Fills a fresh store the way a running monitor leaves it after D days with N targets: 1-hour
rollups for the whole window, 1-minute rollups beside them, ~20 counters, ~8 gauges and 4
histograms of ~100 buckets per target-interval (the schema's TTFT layout), values cycling
through a pool of realistic minutes (hour rows are the exact sums of their minutes). Full
1-minute rows for all N targets over 30 days are ~4.3 M target-minutes, ~140 M value rows,
tens of GB: more than a few minutes of generation here. So the first --minute-targets
targets get every minute, the others only the minutes around the window's edges (all the
store reads of them while hour rows exist); the printed size per target-interval gives the
full size. Then, median of --repeat runs:

  window()            all metrics merged over the window, 1 target and all N targets
  histogram_series()  one histogram at 1 h step for 1 target, with each step's p99
  good_total()        one histogram's good/total at an SLO bound over the window, N targets

first as the store reads them (hour rows inside, minute rows at the edges), then with the hour
rows hidden, the worst case: the window over 1-minute rows only (for the --minute-targets
targets). The window is D days ending 17 minutes before the last stored minute, so neither
edge is on the hour.

    python -m bench.store_query                        # SQLite, and PostgreSQL if the URL is set
    python -m bench.store_query --targets 10 --days 7  # smaller
    INFERWATCH_TEST_POSTGRES_URL=postgresql+psycopg://u:p@host/db python -m bench.store_query
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection, create_engine, delete, func, insert, select, text, update
from sqlalchemy.engine import make_url

from exporters.buckets import interpolate_quantile, latency_buckets
from monitor.collect.snapshot import series_key
from monitor.store import Selector, Store, good_total, histogram_series, open_store, window
from monitor.store.histograms import encode_counts
from monitor.store.ids import ensure_bounds, ensure_series, ensure_targets
from monitor.store.models import Interval, RollupWatermark, SeriesKind, Target
from monitor.store.writes import write_transaction

POSTGRES_URL_ENV = "INFERWATCH_TEST_POSTGRES_URL"
END = 1_800_000_000.0  # the last stored minute ends here (a whole hour)
NUM_PATTERNS = 61      # distinct minutes cycled through; prime, so hours differ
SLO_THRESHOLD_SECONDS = 0.5
Array = NDArray[np.float64]
VALUE_KEY = ["target_id", "resolution", "series_id", "end_time"]


@dataclass(frozen=True, slots=True)
class Scale:
    targets: int
    minute_targets: int  # targets with every minute stored; the others only the window edges
    days: int
    counters: int
    gauges: int
    histograms: int

    @property
    def minutes(self) -> int:
        return self.days * 1440


EDGE_MINUTES = 120  # minutes kept at each end of the range for targets without every minute
MINUTES_LABEL = {"minutes": "all"}


@dataclass(frozen=True, slots=True)
class Patterns:
    """Per pattern p: counter increases [p, s], gauge readings [p, s], bucket counts [p, h, b]."""

    bounds: tuple[float, ...]
    counters: Array
    gauges: Array
    buckets: Array


def make_patterns(scale: Scale, rng: np.random.Generator) -> Patterns:
    bounds = latency_buckets()
    buckets = np.zeros((NUM_PATTERNS, scale.histograms, len(bounds) + 1))
    edges = np.array([0.0, *bounds, np.inf])
    for p in range(NUM_PATTERNS):
        for h in range(scale.histograms):
            latencies = rng.lognormal(math.log(0.05 * (h + 1)), 0.6, rng.integers(100, 400))
            buckets[p, h] = np.histogram(latencies, edges)[0]
    return Patterns(bounds, rng.integers(0, 1000, (NUM_PATTERNS, scale.counters)).astype(float),
                    rng.random((NUM_PATTERNS, scale.gauges)), buckets)


def series_keys(scale: Scale) -> dict[str, SeriesKind]:
    keys = {series_key(f"bench_counter_{i}_total", {"model": "m"}): SeriesKind.COUNTER
            for i in range(scale.counters)}
    keys |= {series_key(f"bench_gauge_{i}", {"model": "m"}): SeriesKind.GAUGE
             for i in range(scale.gauges)}
    keys |= {series_key(f"bench_latency_{i}_seconds", {"model": "m"}): SeriesKind.HISTOGRAM
             for i in range(scale.histograms)}
    return keys


def pattern_of(minute: NDArray[np.int64], target: int) -> NDArray[np.int64]:
    return (minute + 7 * target) % NUM_PATTERNS


# --- filling the store ---------------------------------------------------------------------------

def fill(store: Store, scale: Scale, patterns: Patterns) -> None:
    keys = series_keys(scale)
    names = [f"replica-{t:03d}" for t in range(scale.targets)]
    with write_transaction(store.engine) as conn:
        ensure_targets(conn, store.ids, names)
        ensure_series(conn, store.ids, keys)
        ensure_bounds(conn, store.ids, [patterns.bounds])
        for t, name in enumerate(names):
            labels = {"pool": "prod", **(MINUTES_LABEL if t < scale.minute_targets else {})}
            conn.execute(update(Target).where(Target.name == name).values(labels=labels))
    ids = [store.ids.series[k][0] for k in keys]
    by_kind = {kind: [i for i, k in zip(ids, keys.values()) if k is kind] for kind in SeriesKind}
    bounds_id = store.ids.bounds[patterns.bounds]
    for resolution in (60, 3600):
        with write_transaction(store.engine) as conn:
            bulk_insert = _bulk_inserter(conn)
            for t, name in enumerate(names):
                rows = _Rows(scale, resolution, t, store.ids.targets[name])
                rows.fill(bulk_insert, patterns, by_kind, bounds_id)
    with write_transaction(store.engine) as conn:
        conn.execute(delete(RollupWatermark))
        conn.execute(insert(RollupWatermark), [{"resolution": 60, "watermark": END},
                                               {"resolution": 3600, "watermark": END}])
    if store.engine.dialect.name == "postgresql":
        with store.engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").execute(text("VACUUM ANALYZE"))


Inserter = Callable[[str, list[str], list[tuple[Any, ...]]], None]


class _Rows:
    """Rows of one target at one resolution, written in key order (appends to each b-tree)."""

    def __init__(self, scale: Scale, resolution: int, t: int, target_id: int) -> None:
        minute = np.arange(scale.minutes, dtype=np.int64)
        row = minute // (resolution // 60)
        # How many minutes of each pattern each row holds (rows x patterns).
        self.weights: Array = np.zeros((int(row[-1]) + 1, NUM_PATTERNS))
        np.add.at(self.weights, (row, pattern_of(minute, t)), 1.0)
        first_end = END - scale.minutes * 60 + resolution
        self.ends: Array = first_end + resolution * np.arange(len(self.weights),
                                                              dtype=np.float64)
        if resolution == 60 and t >= scale.minute_targets:
            edges = (minute < EDGE_MINUTES) | (minute >= scale.minutes - EDGE_MINUTES)
            self.weights, self.ends = self.weights[edges], self.ends[edges]
        self.resolution, self.target_id = resolution, target_id

    def keyed(self, series_id: int, *columns: list[Any]) -> list[tuple[Any, ...]]:
        n = len(self.ends)
        return list(zip([self.target_id] * n, [self.resolution] * n, [series_id] * n,
                        self.ends.tolist(), *columns))

    def fill(self, bulk_insert: Inserter, patterns: Patterns,
             by_kind: dict[SeriesKind, list[int]], bounds_id: int) -> None:
        n, weights = len(self.ends), self.weights
        bulk_insert("intervals", ["target_id", "resolution", "end_time", "start_time", "state"],
                    list(zip([self.target_id] * n, [self.resolution] * n, self.ends.tolist(),
                             (self.ends - self.resolution).tolist(), ["up"] * n)))
        counters = weights @ patterns.counters
        for s, series_id in enumerate(by_kind[SeriesKind.COUNTER]):
            bulk_insert("counter_values", [*VALUE_KEY, "increase"],
                        self.keyed(series_id, counters[:, s].tolist()))
        readings_per_row = 4 * self.resolution // 60  # a gauge is read 4 times a minute
        for s, series_id in enumerate(by_kind[SeriesKind.GAUGE]):
            totals = 4 * weights @ patterns.gauges[:, s]
            bulk_insert("gauge_values",
                        [*VALUE_KEY, "last", "total", "num_readings", "minimum", "maximum"],
                        self.keyed(series_id, (totals / readings_per_row).tolist(),
                                   totals.tolist(), [readings_per_row] * n, [0.0] * n,
                                   [1.0] * n))
        for h, series_id in enumerate(by_kind[SeriesKind.HISTOGRAM]):
            counts = weights @ patterns.buckets[:, h, :]
            firsts, blobs = zip(*(encode_counts(row) for row in counts.tolist()))
            observations = counts.sum(axis=1)
            bulk_insert("histogram_values",
                        [*VALUE_KEY, "bounds_id", "sum", "count", "first_bucket", "counts"],
                        self.keyed(series_id, [bounds_id] * n, (0.1 * observations).tolist(),
                                   observations.tolist(), list(firsts), list(blobs)))


def _bulk_inserter(conn: Connection) -> Inserter:
    if conn.dialect.name == "sqlite":
        def insert_sqlite(table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
            marks = ", ".join("?" for _ in columns)
            conn.exec_driver_sql(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
                                 rows)
        return insert_sqlite
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]

    def insert_postgresql(table: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
        with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
    return insert_postgresql


# --- the queries ---------------------------------------------------------------------------------

def timed(repeat: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def p99_per_step(store: Store, start: float, end: float, histogram: str) -> list[float]:
    points = histogram_series(store, Selector("replica-000"), histogram, start, end, 3600)
    return [interpolate_quantile(0.99, delta.bounds, delta.cumulative()) if delta else math.nan
            for _, delta in points]


def run_queries(store: Store, scale: Scale, repeat: int, many: Selector,
                num_many: int) -> dict[str, float]:
    end = END - 17 * 60
    start = end - scale.days * 86_400.0
    # The hourly series starts on an hour (to read hour rows) and ends at the last hour.
    hourly_start = math.ceil(start / 3600) * 3600
    name = "bench_latency_0_seconds"
    one = Selector("replica-000")
    return {
        "window, 1 target": timed(repeat, lambda: window(store, one, start, end)),
        f"window, {num_many} targets": timed(repeat, lambda: window(store, many, start, end)),
        "p99 per 1 h step, 1 target": timed(
            repeat, lambda: p99_per_step(store, hourly_start, END, name)),
        f"good_total, {num_many} targets": timed(
            repeat, lambda: good_total(store, many, name, SLO_THRESHOLD_SECONDS, start, end)),
    }


def num_intervals(store: Store) -> int:
    with store.engine.connect() as conn:
        return int(conn.scalar(select(func.count()).select_from(Interval)) or 0)


def hide_hour_rows(store: Store) -> None:
    """Planner sees no complete hour rollups: everything is read from minute rows."""
    with write_transaction(store.engine) as conn:
        conn.execute(delete(RollupWatermark).where(RollupWatermark.resolution == 3600))


# --- databases -----------------------------------------------------------------------------------

@contextmanager
def sqlite_database() -> Iterator[tuple[str, Callable[[], int]]]:
    with tempfile.TemporaryDirectory(prefix="inferwatch-bench-") as directory:
        path = Path(directory) / "store.db"

        def size() -> int:
            return sum(p.stat().st_size for p in Path(directory).iterdir())
        yield f"sqlite:///{path}", size


@contextmanager
def postgres_database(admin_url: str) -> Iterator[tuple[str, Callable[[], int]]]:
    name = f"inferwatch_bench_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        def size() -> int:
            with admin.connect() as conn:
                return int(conn.scalar(text(f"SELECT pg_database_size('{name}')")) or 0)
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False), size
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def bench_backend(label: str, database: Any, scale: Scale, repeat: int) -> None:
    with database as (url, size):
        store = open_store(url)
        try:
            store.migrate()
            began = time.perf_counter()
            fill(store, scale, make_patterns(scale, np.random.default_rng(0)))
            filled = time.perf_counter() - began
            num_bytes, stored = size(), num_intervals(store)
            as_stored = run_queries(store, scale, repeat, Selector(labels={"pool": "prod"}),
                                    scale.targets)
            hide_hour_rows(store)
            minutes_only = run_queries(store, scale, repeat, Selector(labels=MINUTES_LABEL),
                                       scale.minute_targets)
        finally:
            store.close()
    per_interval = num_bytes / stored
    all_minutes_gib = per_interval * scale.targets * scale.minutes / 2**30
    print(f"\n{label}: filled in {filled:.0f} s; database {num_bytes / 2**20:,.0f} MiB for "
          f"{stored:,} target-intervals, {per_interval:,.0f} bytes each (every minute of all "
          f"{scale.targets} targets would be ~{all_minutes_gib:,.1f} GiB)")
    for title, results in (("as stored: hour rows, minute rows at the edges", as_stored),
                           ("minute rows only (hour rows hidden)", minutes_only)):
        print(f"  {title}, median of {repeat}:")
        for query, seconds in results.items():
            print(f"    {query:<34}{seconds * 1000:>10.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, default=100)
    parser.add_argument("--minute-targets", type=int, default=5,
                        help="targets stored with every minute (the others: window edges)")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--counters", type=int, default=20)
    parser.add_argument("--gauges", type=int, default=8)
    parser.add_argument("--histograms", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    args = parser.parse_args()
    scale = Scale(args.targets, min(args.minute_targets, args.targets), args.days,
                  args.counters, args.gauges, args.histograms)
    print(f"scale: {scale.targets} targets x {scale.days} days of 1-hour rows "
          f"({scale.targets * scale.minutes // 60:,} target-hours); 1-minute rows for "
          f"{scale.minute_targets} targets x {scale.days} days "
          f"({scale.minute_targets * scale.minutes:,} target-minutes) and {EDGE_MINUTES} minutes "
          f"at each end for the others; per target-interval {scale.counters} counters, "
          f"{scale.gauges} gauges, {scale.histograms} histograms of "
          f"{len(latency_buckets()) + 1} buckets")
    if args.backend in ("sqlite", "both"):
        bench_backend("SQLite", sqlite_database(), scale, args.repeat)
    admin_url = os.environ.get(POSTGRES_URL_ENV)
    if args.backend in ("postgresql", "both"):
        if admin_url:
            bench_backend("PostgreSQL", postgres_database(admin_url), scale, args.repeat)
        else:
            print(f"\nPostgreSQL: skipped ({POSTGRES_URL_ENV} not set)")


if __name__ == "__main__":
    main()
