"""Which replica of `inferwatch serve` is active: a PostgreSQL session advisory lock.

Every replica on one PostgreSQL database competes for one advisory lock, ``LOCK_KEY``. The
one that holds it is ACTIVE (it scrapes, evaluates, sends, rolls up, runs sweeps); the others
are STANDBY and try again every ``poll_seconds``. The lock lives on a dedicated connection the
active keeps open: PostgreSQL frees it when that session ends, so a replica killed with
SIGKILL (or cut off from the database) loses it at once and a standby takes over within about
one poll. The active checks its connection every poll (``SELECT 1``); when the check fails it
steps down at once, reconnects and competes again, since it can no longer know whether the lock
is still its own.

An active that lost its lock connection to a database error is HOLDING until the database
answers again: it sends nothing and writes nothing, but its collector scrapes on into its
in-memory buffer. While the database is away no replica can take the lock or write, so those
snapshots are the only record of the outage; they are written once it returns, whichever
replica wins the lock (the store's overlap guard refuses any a new active also covers).

The lock connection is named ``inferwatch:<replica id>`` (its ``application_name``), so any
replica finds the active's id in ``pg_locks`` joined with ``pg_stat_activity``, with nothing
written: a dead replica's name disappears with its session.

On a SQLite file the same roles are decided by an exclusive lock on a file beside the database
(``FileLeadership``, monitor/service/file_leader.py): one writer per store. An in-memory SQLite
store (one process by nature) has no election: ``SingleReplica`` is always active.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any, Final, Protocol

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from monitor.store.db import sqlite_path
from monitor.store.fence import FencedOut

logger = logging.getLogger(__name__)


def _lock_key(name: str) -> int:
    """A fixed signed 64-bit key (PostgreSQL's bigint) derived from ``name``."""
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


LOCK_KEY: Final = _lock_key("inferwatch-evaluator")
# The write fence's key (monitor/store/fence.py): shared by each fenced transaction, taken
# exclusively for a moment by a replica that has just won LOCK_KEY.
FENCE_KEY: Final = _lock_key("inferwatch-write-fence")
APPLICATION_PREFIX: Final = "inferwatch:"
# PostgreSQL keeps at most 63 bytes of application_name.
_MAX_NAME: Final = 63 - len(APPLICATION_PREFIX)

# pg_locks shows a bigint advisory key as two 32-bit halves, classid (high) and objid (low);
# advisory locks are per database (other stores on the server have their own active).
_HELD_LOCK: Final = (
    "FROM pg_locks l {join}WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
    "AND l.classid = :hi AND l.objid = :lo "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "LIMIT 1")
# The active replica's name (its lock session's application_name), and the backend holding
# the lock (the write fence compares it with this replica's lock session).
_ACTIVE_QUERY: Final = text("SELECT a.application_name " + _HELD_LOCK.format(
    join="JOIN pg_stat_activity a ON a.pid = l.pid "))
_HOLDER_QUERY: Final = text("SELECT l.pid " + _HELD_LOCK.format(join=""))


class Role(StrEnum):
    ACTIVE = "active"
    STANDBY = "standby"


def default_replica_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Replica(Protocol):
    """What the service and the API ask of leadership (``Leadership``, ``FileLeadership`` or
    ``SingleReplica``)."""

    replica_id: str
    poll_seconds: float
    changes: int
    since: float
    became_active: asyncio.Event
    became_standby: asyncio.Event
    holding: bool

    @property
    def role(self) -> Role: ...

    @property
    def elected(self) -> bool: ...

    def active_replica(self) -> str | None: ...

    async def run(self, stop: asyncio.Event) -> None: ...


class RoleEvents:
    """Role bookkeeping shared by every kind of replica (monitor/service/file_leader.py has
    the SQLite one)."""

    def __init__(self, replica_id: str, poll_seconds: float,
                 on_change: Callable[[Role], None] | None) -> None:
        self.replica_id = replica_id[:_MAX_NAME]
        self.poll_seconds = poll_seconds
        self.changes = 0              # times this replica became active or stepped down
        self.since = time.time()      # when the current role began
        self.became_active = asyncio.Event()   # set while active
        self.became_standby = asyncio.Event()  # set while standby
        self.became_standby.set()
        self.holding = False  # see the module's doc
        self._role = Role.STANDBY
        self._on_change = on_change

    @property
    def role(self) -> Role:
        return self._role

    def _set(self, role: Role) -> None:
        if role is self._role:
            return
        self._role, self.since = role, time.time()
        self.changes += 1
        (self.became_active if role is Role.ACTIVE else self.became_standby).set()
        (self.became_standby if role is Role.ACTIVE else self.became_active).clear()
        logger.warning("replica %s is now %s", self.replica_id, role.value)
        if self._on_change is not None:
            self._on_change(role)


class SingleReplica(RoleEvents):
    """A store only one process can use (in-memory SQLite): always active, no election. Its
    role is stated as ``active`` since it does everything an active replica does; ``elected``
    False says that no lock decided it."""

    elected = False

    def __init__(self, replica_id: str | None = None, poll_seconds: float = 1.0,
                 on_change: Callable[[Role], None] | None = None) -> None:
        super().__init__(replica_id or default_replica_id(), poll_seconds, on_change)
        self._role = Role.ACTIVE  # from the start: not a change of leader
        self.became_active.set()
        self.became_standby.clear()

    def active_replica(self) -> str | None:
        return self.replica_id

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()


class Leadership(RoleEvents):
    """Competes for ``LOCK_KEY`` on PostgreSQL at ``url`` until ``run``'s stop is set."""

    elected = True

    def __init__(self, url: str, *, replica_id: str | None = None, poll_seconds: float = 1.0,
                 connect_timeout_seconds: float = 5.0, lock_key: int = LOCK_KEY,
                 on_change: Callable[[Role], None] | None = None) -> None:
        super().__init__(replica_id or default_replica_id(), poll_seconds, on_change)
        self.lock_key = lock_key
        name = APPLICATION_PREFIX + self.replica_id
        timeout = max(1, round(connect_timeout_seconds))
        # NullPool: the lock connection is ours alone, and closing it really ends the session.
        # TCP keepalives both ways: a silent network loss fails our check instead of hanging
        # it, and the server ends the session (freeing the lock for a standby) in about 10 s
        # instead of its default two hours.
        self._engine: Engine = create_engine(
            url, poolclass=NullPool, isolation_level="AUTOCOMMIT",
            connect_args={"connect_timeout": timeout, "application_name": name,
                          "keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2,
                          "keepalives_count": 2,
                          "options": "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 "
                                     "-c tcp_keepalives_count=2"})
        self._conn: Connection | None = None
        # The backend pid of the lock session while this replica holds the lock (the write
        # fence compares pg_locks' holder with it); None otherwise.
        self._lock_pid: int | None = None
        self._reads: Engine | None = None  # for active_replica(), opened on first use
        self._url = url
        self.fence_key = FENCE_KEY
        self.fence_wait_seconds = max(2 * poll_seconds, 1.0)

    # --- the election ---

    async def run(self, stop: asyncio.Event) -> None:
        try:
            while not stop.is_set():
                active = self.role is Role.ACTIVE
                # A hung check (a network that drops packets) counts as a failed one.
                try:
                    held, error = await asyncio.wait_for(
                        asyncio.to_thread(self._poll, active),
                        timeout=max(3 * self.poll_seconds, 5.0))
                except TimeoutError:
                    held, error = False, "the lock connection did not answer"
                if error is not None:
                    self.holding = self.holding or active
                    self._lost(error)
                else:  # the database answered: the outage, if any, is over
                    self.holding = False
                    if held:
                        self._set(Role.ACTIVE)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.poll_seconds)
        finally:
            self.holding = False
            self._set(Role.STANDBY)
            await asyncio.to_thread(self.close)

    def _poll(self, active: bool) -> tuple[bool, str | None]:
        """One round in a worker thread (it touches the connection, never the role): the
        active checks its connection, a standby tries for the lock. Whether the lock is held,
        and the error when the connection failed."""
        try:
            if self._conn is None:
                self._conn = self._engine.connect()
            if active:
                self._conn.execute(text("SELECT 1"))
                return True, None
            if self._lock_pid is None:
                got = self._conn.execute(text("SELECT pg_try_advisory_lock(:key)"),
                                         {"key": self.lock_key}).scalar_one()
                if not got:
                    return False, None
                self._lock_pid = int(self._conn.execute(
                    text("SELECT pg_backend_pid()")).scalar_one())
            # Won (now or at an earlier poll whose drain timed out): before acting, wait for
            # the fenced transactions the previous active had begun (monitor/store/fence.py).
            self._conn.execute(text(
                f"SET lock_timeout = {round(self.fence_wait_seconds * 1000)}"))
            self._conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": self.fence_key})
            self._conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": self.fence_key})
            self._conn.execute(text("RESET lock_timeout"))
            return True, None
        except OperationalError as exc:
            if "lock timeout" in str(exc) and self._lock_pid is not None:
                # The previous active's write is still open: keep the lock, drain next poll.
                logger.warning("replica %s: won the lock, waiting for the previous active's "
                               "last write to end", self.replica_id)
                return False, None
            return False, f"{type(exc).__name__}: {exc}".splitlines()[0]
        except Exception as exc:  # any driver error: the session (and the lock) may be gone
            return False, f"{type(exc).__name__}: {exc}".splitlines()[0]

    def _lost(self, why: str) -> None:
        if self.role is Role.ACTIVE:
            logger.error("replica %s: lock connection failed (%s); stepping down",
                         self.replica_id, why)
        else:
            logger.debug("replica %s: cannot reach the database: %s", self.replica_id, why)
        self._set(Role.STANDBY)
        self._drop_connection()

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        self._lock_pid = None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.invalidate()  # never handed back: a broken or doubtful session
                conn.close()

    def close(self) -> None:
        """Give up the lock (its session ends; a standby takes over at its next poll)."""
        self._drop_connection()
        self._engine.dispose()
        if self._reads is not None:
            self._reads.dispose()

    def _lock_halves(self) -> dict[str, int]:
        """The lock key as pg_locks shows it (see _HELD_LOCK)."""
        return {"hi": (self.lock_key >> 32) & 0xFFFFFFFF, "lo": self.lock_key & 0xFFFFFFFF}

    # --- the write fence (monitor/store/fence.py) ---

    def check_fence(self, conn: Connection) -> None:
        """Inside a fenced write transaction on the store: FencedOut unless this replica's
        lock session still holds the lock. The shared FENCE_KEY taken here (until the
        transaction ends) makes a replica that wins the lock wait for this transaction."""
        conn.execute(text("SELECT pg_advisory_xact_lock_shared(:key)"), {"key": self.fence_key})
        holder = conn.execute(_HOLDER_QUERY, self._lock_halves()).scalar()
        mine = self._lock_pid if self.role is Role.ACTIVE else None
        if mine is None or holder != mine:
            raise FencedOut(
                f"replica {self.replica_id} is not the active replica (the lock is held by "
                f"{'no session' if holder is None else f'backend {holder}'}): write refused")

    # --- who is active ---

    def active_replica(self) -> str | None:
        """The id of the replica holding the lock now (blocking); None if none does or the
        database does not answer."""
        if self.role is Role.ACTIVE:
            return self.replica_id
        if self._reads is None:
            self._reads = create_engine(self._url, pool_pre_ping=True, pool_size=1,
                                        max_overflow=0, connect_args={"connect_timeout": 5})
        try:
            with self._reads.connect() as conn:
                name: Any = conn.execute(_ACTIVE_QUERY, self._lock_halves()).scalar()
        except Exception:  # unknown, not an error of the caller's request
            logger.debug("cannot read the active replica", exc_info=True)
            return None
        if not isinstance(name, str):
            return None
        return name.removeprefix(APPLICATION_PREFIX)


def replica_for(url: str, *, replica_id: str | None, poll_seconds: float,
                on_change: Callable[[Role], None] | None = None) -> Replica:
    """A Leadership on PostgreSQL; a FileLeadership on a SQLite file (its lock beside the
    database); a SingleReplica on an in-memory SQLite store."""
    # Imported here: file_leader builds on this module's RoleEvents.
    from monitor.service.file_leader import FileLeadership

    if make_url(url).get_backend_name() == "postgresql":
        return Leadership(url, replica_id=replica_id, poll_seconds=poll_seconds,
                          on_change=on_change)
    database = sqlite_path(url)
    if database is None:
        return SingleReplica(replica_id, poll_seconds, on_change)
    return FileLeadership(database, replica_id=replica_id, poll_seconds=poll_seconds,
                          on_change=on_change)
