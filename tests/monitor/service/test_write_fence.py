"""The write fence on a real PostgreSQL (monitor/store/fence.py): a replica that lost the lock
but has not polled yet (it still believes it is active) writes nothing fenced, and a replica
that wins the lock waits for the fenced transaction the old active had begun."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, text

from monitor.alerting.book import AlertBook
from monitor.service.leader import Leadership, Role
from monitor.slo.evaluator import AlertCondition
from monitor.store import Store
from monitor.store.fence import FencedOut, install_fence
from monitor.store.writes import write_transaction
from tests.monitor.store.databases import Database

pytestmark = pytest.mark.integration


class _Replica:
    """One replica as a process would hold it: its Leadership and its own Store, fenced.
    Polls are driven by hand, so the gap between losing the lock and noticing it is ours."""

    def __init__(self, database: Database, name: str) -> None:
        self.leader = Leadership(database.url, replica_id=name, poll_seconds=0.2)
        self.store: Store = database.open()
        install_fence(self.store.engine, self.leader.check_fence)

    def poll(self) -> bool:
        held, error = self.leader._poll(self.leader.role is Role.ACTIVE)
        assert error is None, error
        if held:
            self.leader._set(Role.ACTIVE)
        return held

    def fenced_write(self, hold_seconds: float = 0.0) -> None:
        with write_transaction(self.store.engine, fenced=True) as conn:
            conn.execute(text("INSERT INTO fence_probe (who) VALUES (:who)"),
                         {"who": self.leader.replica_id})
            time.sleep(hold_seconds)

    def close(self) -> None:
        self.leader.close()
        self.store.close()


@pytest.fixture
def replicas(postgres: Database) -> Iterator[tuple[_Replica, _Replica, Database]]:
    postgres.open().migrate()
    store = postgres.open()
    with store.engine.begin() as conn:
        conn.execute(text("CREATE TABLE fence_probe (n serial PRIMARY KEY, who text)"))
    store.close()
    # Names unique to this database: the lock sessions are killed by name, server-wide.
    suffix = postgres.name[-6:]
    a, b = _Replica(postgres, f"a-{suffix}"), _Replica(postgres, f"b-{suffix}")
    try:
        yield a, b, postgres
    finally:
        a.close()
        b.close()


def _kill_lock_session(database: Database, replica: _Replica) -> None:
    """Terminate the replica's lock session and wait until it is gone (the signal is
    asynchronous), as a SIGKILLed replica's session would be."""
    where = f"application_name = 'inferwatch:{replica.leader.replica_id}'"
    database.admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE {where}")
    engine = create_engine(database.url)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                if not conn.execute(text(f"SELECT 1 FROM pg_stat_activity WHERE {where}")
                                    ).first():
                    return
            time.sleep(0.02)
        pytest.fail("the lock session did not end within 10 s")
    finally:
        engine.dispose()


def _writers(replica: _Replica) -> list[str]:
    with replica.store.engine.connect() as conn:
        return list(conn.execute(text("SELECT who FROM fence_probe ORDER BY n")).scalars())


def test_a_replica_that_lost_the_lock_unnoticed_writes_nothing_fenced(replicas) -> None:
    a, b, database = replicas
    assert a.poll() and not b.poll()
    a.fenced_write()
    with pytest.raises(FencedOut, match=f"replica {b.leader.replica_id} is not the active"):
        b.fenced_write()  # a standby never writes fenced

    _kill_lock_session(database, a)  # a has not polled: it still says ACTIVE
    assert b.poll()
    assert a.leader.role is Role.ACTIVE and b.leader.role is Role.ACTIVE
    with pytest.raises(FencedOut, match=rf"replica {a.leader.replica_id} is not the active "
                                        r"replica \(the lock is held by backend \d+\)"):
        a.fenced_write()
    b.fenced_write()
    # Unfenced writes (snapshots: the overlap guard keeps them single) still go through.
    with write_transaction(a.store.engine) as conn:
        conn.execute(text("INSERT INTO fence_probe (who) VALUES ('a-unfenced')"))
    assert _writers(a) == [a.leader.replica_id, b.leader.replica_id, "a-unfenced"]


def test_the_new_active_waits_for_the_old_actives_open_write(replicas) -> None:
    a, b, database = replicas
    b.leader.fence_wait_seconds = 10.0
    assert a.poll()
    writing = threading.Thread(target=a.fenced_write, kwargs={"hold_seconds": 1.5})
    writing.start()
    time.sleep(0.3)  # a's transaction is open, its fence passed
    _kill_lock_session(database, a)
    started = time.monotonic()
    assert b.poll()  # won the lock; returns only once a's transaction has ended
    waited = time.monotonic() - started
    writing.join()
    assert waited >= 0.9, waited  # the rest of a's 1.5 s
    # a's write, begun while it was active, committed first
    assert _writers(a) == [a.leader.replica_id]
    b.fenced_write()
    with pytest.raises(FencedOut):
        a.fenced_write()
    assert _writers(a) == [a.leader.replica_id, b.leader.replica_id]


def test_a_drain_that_times_out_keeps_the_lock_and_finishes_at_the_next_poll(
        replicas) -> None:
    a, b, database = replicas
    b.leader.fence_wait_seconds = 0.2
    assert a.poll()
    writing = threading.Thread(target=a.fenced_write, kwargs={"hold_seconds": 1.2})
    writing.start()
    time.sleep(0.3)
    _kill_lock_session(database, a)
    assert not b.poll()  # lock won, drain timed out: not active yet
    assert b.leader.role is Role.STANDBY
    # But the lock is b's: nobody else can win it.
    assert b.leader.active_replica() == b.leader.replica_id
    writing.join()
    assert b.poll()
    assert b.leader.role is Role.ACTIVE
    b.fenced_write()
    assert _writers(b) == [a.leader.replica_id, b.leader.replica_id]


def test_the_alert_book_of_a_fenced_out_replica_saves_nothing_and_keeps_its_changes(
        replicas) -> None:
    a, b, database = replicas
    assert a.poll()
    book = AlertBook(a.store)
    firing = AlertCondition({"alertname": "X", "slo": "s"}, {"summary": "burn"}, True, 0.0, 2.0)
    book.update(100.0, [firing], lambda _: False)
    assert len(book.due(100.0)) == 1  # saved as sent, while a held the lock
    _kill_lock_session(database, a)
    assert b.poll()
    resolved = AlertCondition({"alertname": "X", "slo": "s"}, {"summary": "ok"}, False, 0.0, 0.0)
    with pytest.raises(FencedOut):
        book.update(200.0, [resolved], lambda _: False)
    # Nothing of a's after the takeover reached the store: b reads the alert still firing.
    follower = AlertBook(b.store)
    follower.reload()
    assert [alert.state.value for alert in follower.alerts()] == ["firing"]
