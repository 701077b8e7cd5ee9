"""Stored bucket counts and merging them: no database needed."""

from __future__ import annotations

import random

import pytest

from monitor.collect.snapshot import HistogramDelta, merge_deltas, rebucket
from monitor.store.histograms import (
    BucketAccumulator,
    BucketRows,
    decode_counts,
    encode_counts,
)


@pytest.mark.parametrize("counts, first_bucket, num_bytes", [
    ((0, 0, 3, 0, 1, 0, 0), 2, 1 + 3),
    ((0, 0, 0), 0, 0),
    ((1, 300, 3), 0, 1 + 3 * 2),
    ((70_000, 1), 0, 1 + 2 * 4),
    ((2**33, 1), 0, 1 + 2 * 8),
    ((0.5, 1), 0, 1 + 2 * 8),
    ((float("nan"), 1), 0, 1 + 2 * 8),
    ((-1, 1), 0, 1 + 2 * 8),
], ids=["trimmed-both-ends", "all-zero", "two-bytes", "four-bytes", "too-big-for-four",
        "fraction", "nan", "negative"])
def test_counts_are_stored_trimmed_in_the_narrowest_exact_type(
        counts: tuple[float, ...], first_bucket: int, num_bytes: int) -> None:
    first, blob = encode_counts(counts)
    assert (first, len(blob)) == (first_bucket, num_bytes)
    decoded = decode_counts(first, blob, len(counts))
    assert [str(c) for c in decoded] == [str(float(c)) for c in counts]  # nan == nan here


def test_rebucketing_onto_a_subset_of_bounds_keeps_counts_exact_at_those_bounds() -> None:
    fine = HistogramDelta((0.1, 0.2, 0.5, 1.0), (1, 2, 3, 4, 5), 7.0, 15)
    coarse = rebucket(fine, (0.2, 1.0))
    assert coarse == HistogramDelta((0.2, 1.0), (3, 7, 5), 7.0, 15)
    assert coarse.count_at_most(0.2) == fine.count_at_most(0.2)


def test_merging_two_layouts_uses_the_bounds_they_share() -> None:
    merged = merge_deltas([HistogramDelta((0.1, 0.5), (1, 1, 1), 1.0, 3),
                           HistogramDelta((0.2, 0.5), (2, 2, 2), 2.0, 6)])
    assert merged == HistogramDelta((0.5,), (6, 3), 3.0, 9)


def test_the_accumulator_sums_like_merging_one_row_at_a_time() -> None:
    rng = random.Random(7)
    layouts = {1: (0.1, 0.2, 0.5), 2: (0.1, 0.25, 0.5, 1.0)}
    rows: list[tuple[str, int, float, float, int, bytes]] = []
    expected: dict[str, list[HistogramDelta]] = {}
    for _ in range(300):
        group, bounds_id = rng.choice("xyz"), rng.choice([1, 2])
        scale = rng.choice([1, 1000, 0.25])  # one, two and eight bytes a count
        counts = [float(rng.choice([0, 0, rng.randint(1, 9)])) * scale
                  for _ in range(len(layouts[bounds_id]) + 1)]
        first, blob = encode_counts(counts)
        rows.append((group, bounds_id, 0.5, sum(counts), first, blob))
        delta = HistogramDelta(layouts[bounds_id], tuple(counts), 0.5, sum(counts))
        expected.setdefault(group, []).append(delta)
    accumulator = BucketAccumulator(layouts)
    accumulator.add(BucketRows(*zip(*rows[:100])))
    accumulator.add(BucketRows(*zip(*rows[100:])))
    accumulator.add(BucketRows([], [], [], [], [], []))
    got = accumulator.result()
    for group, deltas in expected.items():
        want = merge_deltas(deltas)
        assert (got[group].bounds, got[group].counts) == (want.bounds, want.counts)
        assert got[group].count == want.count
