from __future__ import annotations

import dataclasses
import math

from sqlalchemy import func, select

from exporters.buckets import interpolate_quantile
from monitor.collect.snapshot import TargetState, merge_snapshots
from monitor.store import RetentionPolicy, Selector, Store, window
from monitor.store.models import Interval
from monitor.store.rollup import rollup
from tests.monitor.store.builders import (
    BOUNDS,
    ERRORS,
    KV_USAGE,
    REQUESTS,
    T0,
    TTFT,
    down,
    random_run,
    up,
)

HOUR = 3600.0


def _rolled_up_only(store: Store, now: float) -> None:
    """Roll up, then drop raw and minute rows, so queries can only read hour rows."""
    store.rollup(now, lateness_seconds=0)
    store.apply_retention(now, RetentionPolicy(raw_seconds=1, minute_seconds=1))


def _rows(store: Store, resolution: int) -> int:
    with store.engine.connect() as conn:
        return conn.scalar(select(func.count()).select_from(Interval)
                           .where(Interval.resolution == resolution)) or 0


def test_an_error_ratio_over_an_hour_of_rollups_is_summed_errors_over_summed_requests(
        store: Store) -> None:
    raw = random_run("a", T0, T0 + HOUR, seed=1)
    store.write(raw)
    _rolled_up_only(store, now=T0 + 2 * HOUR)
    assert _rows(store, 0) == _rows(store, 60) == 0 and _rows(store, 3600) == 1
    rolled = window(store, Selector("a"), T0, T0 + HOUR)
    errors, requests = sum(s.counters[ERRORS] for s in raw), sum(s.counters[REQUESTS] for s in raw)
    assert rolled.counters[ERRORS] / rolled.counters[REQUESTS] == errors / requests
    mean_of_ratios = sum(s.counters[ERRORS] / s.counters[REQUESTS] for s in raw) / len(raw)
    assert errors / requests != mean_of_ratios  # what averaging would have got wrong


def test_p99_from_rolled_up_buckets_is_p99_from_the_merged_raw_buckets(store: Store) -> None:
    raw = random_run("a", T0, T0 + HOUR, seed=2)
    store.write(raw)
    _rolled_up_only(store, now=T0 + 2 * HOUR)
    rolled = window(store, Selector("a"), T0, T0 + HOUR).histograms[TTFT]
    merged = merge_snapshots("a", raw).histograms[TTFT]
    assert rolled.counts == merged.counts and rolled.count == merged.count
    assert math.isclose(rolled.sum, merged.sum, rel_tol=1e-12)
    p99 = interpolate_quantile(0.99, BOUNDS, rolled.cumulative())
    assert p99 == interpolate_quantile(0.99, BOUNDS, merged.cumulative())


def test_gauges_roll_up_to_the_statistics_of_every_reading(store: Store) -> None:
    raw = random_run("a", T0, T0 + HOUR, seed=3)
    store.write(raw)
    _rolled_up_only(store, now=T0 + 2 * HOUR)
    stats = window(store, Selector("a"), T0, T0 + HOUR).gauges[KV_USAGE]
    readings = [s.gauges[KV_USAGE].last for s in raw]
    assert stats.num_readings == len(readings) == 240
    assert math.isclose(stats.mean, sum(readings) / len(readings), rel_tol=1e-12)
    assert (stats.minimum, stats.maximum, stats.last) == (min(readings), max(readings),
                                                          readings[-1])


def test_rollup_only_does_new_buckets_and_rerunning_it_writes_nothing(store: Store) -> None:
    store.write(random_run("a", T0, T0 + 600, seed=4))
    assert store.rollup(T0 + 300, lateness_seconds=0) == {60: 5, 3600: 0}
    assert store.rollup(T0 + 300, lateness_seconds=0) == {60: 0, 3600: 0}
    assert store.rollup(T0 + 330, lateness_seconds=30) == {60: 0, 3600: 0}  # not closed yet
    assert store.rollup(T0 + 2 * HOUR, lateness_seconds=0) == {60: 5, 3600: 1}
    assert _rows(store, 60) == 10 and _rows(store, 3600) == 1


def test_an_hour_is_rolled_up_only_once_all_its_minutes_are(store: Store) -> None:
    raw = random_run("a", T0, T0 + HOUR, seed=7)
    store.write(raw)
    store.rollup(T0 + 1800, lateness_seconds=0)  # minutes of the first half hour
    hours_only = ((60, 3600, 3600),)  # as if the minutes lagged behind (a concurrent rewind)
    assert rollup(store.engine, store.ids, T0 + 2 * HOUR, 0, hours_only) == {3600: 0}
    assert store.rollup(T0 + 2 * HOUR, lateness_seconds=0) == {60: 30, 3600: 1}
    _rolled_up_only(store, now=T0 + 2 * HOUR)
    got = window(store, Selector("a"), T0, T0 + HOUR).counters[REQUESTS]
    assert got == sum(s.counters[REQUESTS] for s in raw)


def test_rollup_skips_a_long_gap_without_walking_it(store: Store) -> None:
    store.write([up("a", T0 + 15), up("a", T0 + 90 * 86_400 + 15)])
    assert store.rollup(T0 + 91 * 86_400, lateness_seconds=0) == {60: 2, 3600: 2}


def test_a_minute_down_throughout_rolls_up_down_with_the_last_error(store: Store) -> None:
    store.write([down("a", T0 + 15 * k, f"refused {k}") for k in range(1, 5)]
                + [up("a", T0 + 75), down("a", T0 + 90)])
    _rolled_up_only(store, now=T0 + 100)  # minutes survive: no hour rollup yet
    store.rollup(T0 + 120, lateness_seconds=0)
    first = window(store, Selector("a"), T0, T0 + 60)
    assert (first.state, first.error, first.counters) == (TargetState.DOWN, "refused 4", {})
    second = window(store, Selector("a"), T0 + 60, T0 + 120)
    assert (second.state, second.error) == (TargetState.UP, None)


def test_a_bucket_layout_change_inside_an_hour_merges_on_the_shared_bounds(
        store: Store) -> None:
    finer = (0.05, 0.1, 0.2, 0.25, 0.5, 1.0, 2.5)
    store.write([up("a", T0 + 15, ttft_counts=(1, 1, 1, 1, 1, 1, 1)),
                 up("a", T0 + 30, bounds=finer, ttft_counts=(1, 1, 1, 1, 1, 1, 1, 1))])
    _rolled_up_only(store, now=T0 + 2 * HOUR)
    delta = window(store, Selector("a"), T0, T0 + HOUR).histograms[TTFT]
    assert (delta.bounds, delta.counts, delta.count) == (BOUNDS, (2, 2, 3, 2, 2, 2, 2), 15)


def test_rollup_rows_cover_their_whole_bucket(store: Store) -> None:
    store.write([dataclasses.replace(up("a", T0 + 20), start=T0 + 5)])
    store.rollup(T0 + HOUR, lateness_seconds=0)
    with store.engine.connect() as conn:
        rows = conn.execute(select(Interval.resolution, Interval.start_time, Interval.end_time)
                            .order_by(Interval.resolution)).all()
    assert [tuple(r) for r in rows] == [(0, T0 + 5, T0 + 20), (60, T0, T0 + 60),
                                        (3600, T0, T0 + HOUR)]
