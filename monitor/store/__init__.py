"""The monitor's store: snapshots in SQLite (embedded default) or PostgreSQL, rolled up to
1-minute and 1-hour buckets, kept per a retention policy, and queried as totals."""

from monitor.store.buffer import BufferedWriter
from monitor.store.db import Store, TargetInfo, open_store, shown_url
from monitor.store.queries import (
    Selector,
    counter_series,
    gauge_series,
    good_total,
    histogram_series,
    window,
    window_by_target,
)
from monitor.store.retention import RetentionPolicy

__all__ = [
    "BufferedWriter",
    "RetentionPolicy",
    "Selector",
    "Store",
    "TargetInfo",
    "counter_series",
    "gauge_series",
    "good_total",
    "histogram_series",
    "open_store",
    "shown_url",
    "window",
    "window_by_target",
]
