"""Histogram bucket counts as stored, and merging them across rows, series and bounds changes.

Counts are stored non-cumulative, with the zero buckets before the first and after the last
non-zero one trimmed (latency distributions fill a contiguous band of a ~100-bucket layout),
in the narrowest little-endian type that holds them exactly: counts of one interval are
whole numbers, mostly small, so 1 or 2 bytes each instead of 8 (a third of the table size).
The blob's first byte names the type. Sums over many rows are done with numpy (one
``bincount`` per batch of rows), never bucket by bucket in Python.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from monitor.collect.snapshot import HistogramDelta, merge_deltas

# Type code (first byte of a stored blob) -> element type; whole counts use the narrowest.
_TYPES: dict[bytes, np.dtype[Any]] = {
    b"B": np.dtype("u1"), b"H": np.dtype("<u2"), b"I": np.dtype("<u4"), b"d": np.dtype("<f8")}
_WHOLE_TYPES = ((b"B", 2**8), (b"H", 2**16), (b"I", 2**32))


def encode_counts(counts: Sequence[float]) -> tuple[int, bytes]:
    """(index of the first count kept, type code + the kept counts); all zero -> (0, b"")."""
    nonzero = [i for i, c in enumerate(counts) if c != 0]
    if not nonzero:
        return 0, b""
    first, last = nonzero[0], nonzero[-1]
    kept = np.asarray(counts[first:last + 1], dtype=np.float64)
    code = b"d"
    if np.all((kept >= 0) & (kept == np.floor(kept))):  # False for NaN and inf
        code = next((c for c, limit in _WHOLE_TYPES if kept.max() < limit), b"d")
    return first, code + kept.astype(_TYPES[code]).tobytes()


def decode_counts(first_bucket: int, blob: bytes, num_buckets: int) -> tuple[float, ...]:
    counts = np.zeros(num_buckets, dtype=np.float64)
    if blob:
        kept = np.frombuffer(blob, dtype=_TYPES[blob[:1]], offset=1)
        counts[first_bucket:first_bucket + kept.size] = kept
    return tuple(counts.tolist())


def bounds_digest(bounds: Sequence[float]) -> str:
    # json.dumps writes floats with repr, which round-trips exactly.
    return hashlib.sha256(json.dumps(list(bounds)).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class BucketRows:
    """Stored histogram rows as read back, column by column: per row the group it is summed
    into, its bounds id, sum, count, first bucket index and counts blob."""

    groups: Sequence[Hashable]
    bounds_ids: Sequence[int]
    sums: Sequence[float | None]
    counts: Sequence[float | None]
    first_buckets: Sequence[int]
    blobs: Sequence[bytes]


class BucketAccumulator:
    """Sums stored histogram rows per (group, bounds id), a batch of rows at a time, with
    numpy over whole columns (per-row Python work is what a 30-day query would spend on)."""

    def __init__(self, bounds_by_id: dict[int, tuple[float, ...]]) -> None:
        self._bounds_by_id = bounds_by_id
        self._totals: dict[tuple[Hashable, int], tuple[npt.NDArray[np.float64], float, float]]
        self._totals = {}

    def add(self, rows: BucketRows) -> None:
        if not rows.blobs:
            return
        row_keys = list(zip(rows.groups, rows.bounds_ids))
        keys = list(dict.fromkeys(row_keys))
        slot = {key: i for i, key in enumerate(keys)}
        slots = np.array([slot[key] for key in row_keys], dtype=np.int64)
        width = max(len(self._bounds_by_id[bounds_id]) + 1 for _, bounds_id in keys)
        # Flat position of each row's first kept count: its slot, then its bucket index.
        base = slots * width + np.asarray(rows.first_buckets, dtype=np.int64)
        buckets = np.zeros(len(keys) * width)
        for code, dtype in _TYPES.items():
            chosen = [i for i, blob in enumerate(rows.blobs) if blob[:1] == code]
            if chosen:
                positions, values = _positions_and_values(
                    [rows.blobs[i] for i in chosen], dtype, base[chosen])
                buckets += np.bincount(positions, weights=values, minlength=buckets.size)
        sums = np.bincount(slots, weights=np.asarray(rows.sums, dtype=np.float64),
                           minlength=len(keys))  # None -> NaN
        counts = np.bincount(slots, weights=np.asarray(rows.counts, dtype=np.float64),
                             minlength=len(keys))
        per_slot = buckets.reshape(len(keys), width)
        for key, i in slot.items():
            num_buckets = len(self._bounds_by_id[key[1]]) + 1
            total, total_sum, total_count = self._totals.get(
                key, (np.zeros(num_buckets), 0.0, 0.0))
            self._totals[key] = (total + per_slot[i, :num_buckets],
                                 total_sum + float(sums[i]), total_count + float(counts[i]))

    def result(self) -> dict[Hashable, HistogramDelta]:
        """One merged delta per group (layouts of one group reduced to their shared bounds)."""
        by_group: dict[Hashable, list[HistogramDelta]] = {}
        for (group, bounds_id), (counts, total_sum, total_count) in self._totals.items():
            delta = HistogramDelta(self._bounds_by_id[bounds_id], tuple(counts.tolist()),
                                   total_sum, total_count)
            by_group.setdefault(group, []).append(delta)
        return {group: merge_deltas(deltas) for group, deltas in by_group.items()}


def _positions_and_values(blobs: Sequence[bytes], dtype: np.dtype[Any],
                          base: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64],
                                                                npt.NDArray[np.float64]]:
    """Counts of blobs stored with one type, and where each goes (base + index in the row)."""
    lengths = np.array([len(blob) - 1 for blob in blobs], dtype=np.int64) // dtype.itemsize
    values = np.frombuffer(b"".join(blob[1:] for blob in blobs), dtype=dtype)
    row_offset = np.cumsum(lengths) - lengths
    positions = np.repeat(base - row_offset, lengths)
    return positions + np.arange(values.size), values.astype(np.float64)


def value_positions(blobs: Sequence[bytes], first_buckets: Sequence[int]
                    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                               npt.NDArray[np.float64]]:
    """Every stored count of these rows as (row index, bucket index, count), all types,
    gathered from the joined blobs with numpy (no Python work per row but its length)."""
    lengths = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs))
    data = np.frombuffer(b"".join(blobs), dtype=np.uint8)
    starts = np.cumsum(lengths) - lengths
    codes = np.zeros(len(blobs), dtype=np.uint8)
    codes[lengths > 0] = data[starts[lengths > 0]]  # a blob's first byte names its type
    firsts = np.asarray(first_buckets, dtype=np.int64)
    rows, buckets, values = [], [], []
    for code, dtype in _TYPES.items():
        chosen = np.flatnonzero(codes == code[0])
        if not chosen.size:
            continue
        per_row = (lengths[chosen] - 1) // dtype.itemsize
        num_bytes = per_row * dtype.itemsize
        gather = (np.repeat(starts[chosen] + 1 - (np.cumsum(num_bytes) - num_bytes), num_bytes)
                  + np.arange(int(num_bytes.sum())))
        found = data[gather].view(dtype).astype(np.float64)
        rows.append(np.repeat(chosen, per_row))
        buckets.append(np.repeat(firsts[chosen] - (np.cumsum(per_row) - per_row), per_row)
                       + np.arange(found.size))
        values.append(found)
    if not values:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty.copy(), np.zeros(0)
    return np.concatenate(rows), np.concatenate(buckets), np.concatenate(values)
