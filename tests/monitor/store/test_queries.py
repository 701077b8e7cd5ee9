from __future__ import annotations

import math

import pytest

from monitor.collect.snapshot import TargetState, merge_snapshots
from monitor.store import (
    RetentionPolicy,
    Selector,
    Store,
    TargetInfo,
    counter_series,
    gauge_series,
    good_total,
    histogram_series,
    window,
    window_by_target,
)
from monitor.store.reads import Piece, plan
from tests.monitor.store.builders import (
    ERRORS,
    KV_USAGE,
    REQUESTS,
    T0,
    TTFT,
    TTFT_NAME,
    down,
    random_run,
    up,
)

HOUR = 3600.0
REQUESTS_NAME = "gen_ai_server_requests_total"


def _replicas(store: Store) -> None:
    for name, pool in (("a", "blue"), ("b", "blue"), ("c", "green")):
        store.register_target(TargetInfo(name, f"http://{name}/metrics", "vllm", {"pool": pool}))
    store.write([up("a", T0 + 15, requests=10, ttft_counts=(5, 0, 0, 0, 0, 0, 0)),
                 up("b", T0 + 15, requests=20, ttft_counts=(0, 0, 0, 0, 0, 0, 5)),
                 up("c", T0 + 15, requests=40, ttft_counts=(1, 1, 1, 1, 1, 1, 1))])


def test_a_label_selection_merges_its_replicas_histograms(store: Store) -> None:
    _replicas(store)
    blue = window(store, Selector(labels={"pool": "blue"}), T0, T0 + 60)
    assert blue.counters[REQUESTS] == 30.0
    assert blue.histograms[TTFT].counts == (5, 0, 0, 0, 0, 0, 5)
    assert blue.histograms[TTFT].count == 10
    assert window(store, Selector("c"), T0, T0 + 60).counters[REQUESTS] == 40.0


def test_window_by_target_keeps_each_replica_apart(store: Store) -> None:
    _replicas(store)
    store.write([down("d", T0 + 15, "refused")])
    by_target = window_by_target(store, Selector(), T0, T0 + 60)
    assert {name: s.counters.get(REQUESTS) for name, s in by_target.items()} == {
        "a": 10.0, "b": 20.0, "c": 40.0, "d": None}
    assert (by_target["d"].state, by_target["d"].error) == (TargetState.DOWN, "refused")
    assert by_target["b"].histograms[TTFT].counts == (0, 0, 0, 0, 0, 0, 5)


def test_good_total_counts_observations_at_or_below_a_bound(store: Store) -> None:
    _replicas(store)
    # Bounds 0.05, 0.1, 0.25, ...: at or below 0.25 are the first three buckets.
    everyone = good_total(store, Selector(), TTFT_NAME, 0.25, T0, T0 + 60)
    assert everyone == (5 + 3, 5 + 5 + 7)
    assert good_total(store, Selector("b"), TTFT_NAME, 2.5, T0, T0 + 60) == (0, 5)


def test_good_total_refuses_a_threshold_that_is_not_a_bound(store: Store) -> None:
    _replicas(store)
    with pytest.raises(ValueError, match=r"0.3 is not a bucket bound .* \[0.1, 0.25, 0.5\]"):
        good_total(store, Selector(), TTFT_NAME, 0.3, T0, T0 + 60)


def test_down_steps_are_gaps_and_quiet_steps_are_zeros(store: Store) -> None:
    store.write([up("a", T0 + 60, requests=10), down("a", T0 + 120),
                 up("a", T0 + 180, requests=0)])
    assert counter_series(store, Selector("a"), REQUESTS, T0, T0 + 180, 60) == [
        (T0 + 60, 10.0), (T0 + 120, None), (T0 + 180, 0.0)]
    points = histogram_series(store, Selector("a"), TTFT_NAME, T0, T0 + 180, 60)
    assert [delta is None for _, delta in points] == [False, True, False]


def test_the_last_step_is_clipped_to_the_end_of_the_range(store: Store) -> None:
    store.write([up("a", T0 + 15 * k, requests=1) for k in range(1, 7)])
    assert counter_series(store, Selector("a"), REQUESTS_NAME, T0, T0 + 90, 60) == [
        (T0 + 60, 4.0), (T0 + 90, 2.0)]


def test_an_hourly_series_reads_hours_then_minutes_then_the_raw_tail(store: Store) -> None:
    raw = random_run("a", T0, T0 + 3 * HOUR, seed=5)
    store.write(raw)
    now = T0 + 2.5 * HOUR
    store.rollup(now, lateness_seconds=0)  # hours 1-2 rolled up, minutes up to 2:30
    store.apply_retention(now, RetentionPolicy(raw_seconds=1, minute_seconds=1))
    points = histogram_series(store, Selector("a"), TTFT, T0, T0 + 3 * HOUR, HOUR)
    for hour, (t, delta) in enumerate(points):
        expected = merge_snapshots("a", [s for s in raw if t - HOUR < s.end <= t])
        assert t == T0 + (hour + 1) * HOUR
        assert delta is not None and delta.counts == expected.histograms[TTFT].counts
    requests = counter_series(store, Selector("a"), REQUESTS, T0, T0 + 3 * HOUR, HOUR)
    assert [v for _, v in requests] == [
        sum(s.counters[REQUESTS] for s in raw if t - HOUR < s.end <= t) for t, _ in requests]


def test_a_window_off_the_hour_reads_finer_rows_at_its_edges(store: Store) -> None:
    raw = random_run("a", T0, T0 + 3 * HOUR, seed=6)
    store.write(raw)
    store.rollup(T0 + 3 * HOUR, lateness_seconds=0)
    start, end = T0 + 1000, T0 + 8000
    inside = [s for s in raw if start < s.end <= end]
    got = window(store, Selector("a"), start, end)
    expected = merge_snapshots("a", inside)
    assert got.counters == expected.counters
    assert got.histograms[TTFT].counts == expected.histograms[TTFT].counts
    assert got.gauges[KV_USAGE].num_readings == len(inside)
    # Intervals are [990, 1005) .. [7980, 7995): selected by their ends.
    assert (got.start, got.end) == (T0 + 990, T0 + 7995)


def test_plan_covers_a_range_with_the_coarsest_complete_rows() -> None:
    pieces = plan(T0 + 1000, T0 + 11000, (3600, 60, 0), {60: T0 + 9000, 3600: T0 + 7200})
    assert pieces == [Piece(0, T0 + 1000, T0 + 1020), Piece(60, T0 + 1020, T0 + 3600),
                      Piece(3600, T0 + 3600, T0 + 7200), Piece(60, T0 + 7200, T0 + 9000),
                      Piece(0, T0 + 9000, T0 + 11000)]


def test_gauge_series_gives_each_steps_statistics(store: Store) -> None:
    store.write([up("a", T0 + 30, kv_usage=0.2), up("a", T0 + 60, kv_usage=0.4),
                 up("a", T0 + 90, kv_usage=0.9)])
    [(_, first), (_, second)] = gauge_series(store, Selector("a"), KV_USAGE, T0, T0 + 120, 60)
    assert first is not None and second is not None
    assert (first.num_readings, first.minimum, first.maximum, first.last) == (2, 0.2, 0.4, 0.4)
    assert math.isclose(first.mean, 0.3) and second.mean == 0.9


def test_a_window_with_nothing_stored_says_so(store: Store) -> None:
    got = window(store, Selector("nobody"), T0, T0 + 60)
    assert (got.state, got.error, got.counters) == (TargetState.DOWN, "no data", {})


def test_a_window_where_the_target_was_down_carries_the_last_error(store: Store) -> None:
    store.write([down("a", T0 + 15, "refused"), down("a", T0 + 30, "timeout")])
    got = window(store, Selector("a"), T0, T0 + 60)
    assert (got.state, got.error) == (TargetState.DOWN, "timeout")


def test_asking_for_a_metric_as_the_wrong_kind_is_refused(store: Store) -> None:
    store.write([up("a", T0 + 15)])
    with pytest.raises(ValueError, match="is a histogram, not a counter"):
        counter_series(store, Selector("a"), TTFT_NAME, T0, T0 + 60, 60)


@pytest.mark.parametrize("start, end, step", [(T0, T0, 60), (T0, T0 + 60, 0)],
                         ids=["empty-range", "zero-step"])
def test_a_bad_range_or_step_is_refused(store: Store, start: float, end: float,
                                        step: float) -> None:
    with pytest.raises(ValueError, match="start < end|step must be positive"):
        counter_series(store, Selector("a"), ERRORS, start, end, step)


def test_a_selector_matches_by_name_and_by_every_label() -> None:
    selector = Selector(labels={"pool": "blue", "region": "eu"})
    assert selector.matches("x", {"pool": "blue", "region": "eu", "zone": "1"})
    assert not selector.matches("x", {"pool": "blue"})
    assert Selector("a").matches("a", {}) and not Selector("a").matches("b", {})
    assert str(selector) == '{pool="blue",region="eu"}'
