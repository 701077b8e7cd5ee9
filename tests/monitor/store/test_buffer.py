from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import pytest
from sqlalchemy.exc import OperationalError

from monitor.collect.snapshot import Snapshot
from monitor.store import BufferedWriter, Store
from monitor.store.reads import Piece, load_snapshots
from tests.monitor.store.builders import T0, up
from tests.monitor.store.databases import Database


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _stored_ends(store: Store) -> list[float]:
    with store.engine.connect() as conn:
        return sorted(s.end for s in load_snapshots(conn, store.ids,
                                                     Piece(0, -math.inf, math.inf)))


def test_snapshots_wait_out_an_outage_and_are_written_once_when_it_ends(
        database: Database, store: Store, caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    writer = BufferedWriter(store, max_buffered=6, max_batch=4, clock=clock)
    writer.submit(up("a", T0 + 15))
    assert writer.flush()
    with database.outage():
        for k in range(2, 6):
            writer.submit(up("a", T0 + 15 * k))
        with caplog.at_level(logging.WARNING, logger="monitor.store.buffer"):
            assert not writer.flush()
            clock.now += 1.0  # the first retry is due after 1 s
            assert not writer.flush()
        assert writer.num_buffered == 4
        for k in range(6, 10):  # 8 waiting, room for 6: the two oldest go
            writer.submit(up("a", T0 + 15 * k))
    assert (writer.num_buffered, writer.num_dropped) == (6, 2)
    assert [r.levelname for r in caplog.records] == ["WARNING"]  # one line per outage
    assert not writer.flush()  # back, but the 2 s backoff has not passed yet
    clock.now += 2.0
    assert writer.flush()
    assert writer.num_buffered == 0 and not writer.in_outage
    assert _stored_ends(store) == [T0 + 15] + [T0 + 15 * k for k in range(4, 10)]


class FailingSink:
    def __init__(self, error: Exception) -> None:
        self.error, self.calls = error, 0

    def write(self, snapshots: Sequence[Snapshot]) -> None:
        self.calls += 1
        raise self.error


def _outage_error() -> OperationalError:
    return OperationalError("INSERT ...", {}, Exception("connection refused"))


def test_retries_back_off_exponentially_up_to_the_maximum() -> None:
    clock, sink = FakeClock(), FailingSink(_outage_error())
    writer = BufferedWriter(sink, initial_backoff_seconds=1.0, max_backoff_seconds=4.0,
                            clock=clock)
    writer.submit(up("a", T0 + 15))
    attempts_at = []
    for _ in range(80):
        calls = sink.calls
        writer.flush()
        if sink.calls > calls:
            attempts_at.append(clock.now)
        clock.now += 0.5
    assert attempts_at[:6] == [0.0, 1.0, 3.0, 7.0, 11.0, 15.0]


class RefusingSink:
    """Refuses any batch holding target "bad" (as a series changing kind would be)."""

    def __init__(self) -> None:
        self.written: list[Snapshot] = []

    def write(self, snapshots: Sequence[Snapshot]) -> None:
        if any(s.target == "bad" for s in snapshots):
            raise ValueError("series x is stored as a counter")
        self.written.extend(snapshots)


def test_a_snapshot_the_store_refuses_is_counted_and_the_rest_are_written(
        caplog: pytest.LogCaptureFixture) -> None:
    sink = RefusingSink()
    writer = BufferedWriter(sink)
    for target in ("a", "bad", "b"):
        writer.submit(up(target, T0 + 15))
    with caplog.at_level(logging.ERROR, logger="monitor.store.buffer"):
        assert writer.flush()
    assert [s.target for s in sink.written] == ["a", "b"]
    assert writer.num_rejected == 1 and not writer.in_outage
    assert "store refused the snapshot of bad" in caplog.text


@pytest.mark.parametrize("max_buffered, max_batch", [(0, 1), (1, 0)], ids=["buffer", "batch"])
def test_limits_must_be_positive(max_buffered: int, max_batch: int) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        BufferedWriter(FailingSink(ValueError()), max_buffered=max_buffered,
                       max_batch=max_batch)
