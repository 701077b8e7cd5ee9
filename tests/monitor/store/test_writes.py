from __future__ import annotations

import dataclasses
import math

import pytest
from sqlalchemy import func, select

from monitor.collect.snapshot import GaugeStats, Snapshot, TargetState
from monitor.store import RetentionPolicy, Selector, Store, TargetInfo, window
from monitor.store.models import CounterValue, Interval
from monitor.store.reads import Piece, load_snapshots
from tests.monitor.store.builders import ERRORS, KV_USAGE, REQUESTS, T0, down, up


def _raw(store: Store) -> list[Snapshot]:
    with store.engine.connect() as conn:
        return load_snapshots(conn, store.ids, Piece(0, -math.inf, math.inf))


def test_writing_a_snapshot_again_replaces_it_instead_of_adding_a_row(store: Store) -> None:
    store.write([up("a", T0 + 15, requests=10.0, errors=2.0)])
    store.write([up("a", T0 + 15, requests=10.0, errors=2.0)])
    changed = dataclasses.replace(up("a", T0 + 15), counters={REQUESTS: 12.0})
    store.write([changed])
    with store.engine.connect() as conn:
        assert conn.scalar(select(func.count()).select_from(Interval)) == 1
        assert conn.scalar(select(func.count()).select_from(CounterValue)) == 1
    [stored] = _raw(store)
    assert stored.counters == {REQUESTS: 12.0}  # the errors series of the first write is gone


def test_a_down_interval_is_stored_as_down_with_its_error_and_no_values(store: Store) -> None:
    store.write([up("a", T0 + 15), down("a", T0 + 30, "connect timeout after 5.0 s")])
    first, second = sorted(_raw(store), key=lambda s: s.end)
    assert first.state is TargetState.UP
    assert (second.state, second.error) == (TargetState.DOWN, "connect timeout after 5.0 s")
    assert (second.counters, second.gauges, second.histograms) == ({}, {}, {})


def test_a_nan_gauge_reading_reads_back_as_nan(store: Store) -> None:
    snapshot = up("a", T0 + 15)
    store.write([Snapshot(snapshot.target, snapshot.start, snapshot.end, snapshot.state,
                          gauges={KV_USAGE: GaugeStats.of(math.nan)})])
    [stored] = _raw(store)
    assert math.isnan(stored.gauges[KV_USAGE].last)
    assert stored.gauges[KV_USAGE].num_readings == 1


def test_a_series_stored_as_a_counter_cannot_be_written_as_a_gauge(store: Store) -> None:
    store.write([up("a", T0 + 15)])
    wrong = Snapshot("a", T0 + 15, T0 + 30, TargetState.UP,
                     gauges={ERRORS: GaugeStats.of(1.0)})
    with pytest.raises(ValueError, match="stored as a counter"):
        store.write([wrong])
    assert len(_raw(store)) == 1  # the failed write left nothing behind


def test_registering_a_target_sets_and_then_updates_its_description(store: Store) -> None:
    store.write([up("a", T0 + 15)])
    store.register_target(TargetInfo("a", "http://a:8000/metrics", "vllm", {"pool": "blue"}))
    store.register_target(TargetInfo("a", "http://a:8000/metrics", "vllm", {"pool": "green"}))
    assert store.targets() == [TargetInfo("a", "http://a:8000/metrics", "vllm",
                                          {"pool": "green"})]
    assert window(store, Selector(labels={"pool": "green"}), T0, T0 + 15).counters[REQUESTS] \
        == 10.0


def test_a_raw_write_behind_the_rollup_watermark_is_rolled_up_on_the_next_run(
        store: Store) -> None:
    store.write([up("a", T0 + 15 * k, requests=1.0) for k in range(2, 6)])
    store.rollup(now=T0 + 600, lateness_seconds=0)
    # A late scrape of minute one (its start, before what is stored: not an overlap).
    store.write([up("a", T0 + 15, requests=101.0, duration=15)])
    store.rollup(now=T0 + 600, lateness_seconds=0)
    store.apply_retention(T0 + 600, policy=RetentionPolicy(raw_seconds=1.0))  # minutes only
    assert window(store, Selector("a"), T0, T0 + 60).counters[REQUESTS] == 104.0
