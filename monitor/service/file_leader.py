"""Which process is active on a SQLite store: an exclusive lock on a file beside the database.

SQLite has one writer. Every `inferwatch serve` or `collect` process on one database file takes,
without waiting, an exclusive ``flock`` on ``<database>.lock``: the one that holds it is
ACTIVE, the others are STANDBY and try again every ``poll_seconds``, doing what a PostgreSQL
standby does (monitor/service/leader.py: the same roles, events and API). The kernel frees the
lock when its holder's file is closed, which the holder's death does (SIGKILL included), so a
standby takes over within about one poll.

The holder writes who it is into the lock file (one JSON object: replica id, host, pid, since
when). A standby reads it back for its log (once per holder) and for ``active_replica()`` (the
API's ``active_replica_id``). The file is never deleted: a process waiting on a lock file that
another one unlinks would lock a file nobody else sees. For the same reason a process checks,
once it has the lock, that the path still names the file it locked, and the active checks it
again every poll (someone deleting it would let a second process lock a new one): if the path
names another file, it competes for that one, and steps down if another process holds it.

Unlike a PostgreSQL session, the lock cannot be taken from a living process, so there is no
write fence and no HOLDING here: the lock changes hands only when its holder stops or dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Final

from monitor.service.leader import Role, RoleEvents, default_replica_id

logger = logging.getLogger(__name__)

LOCK_SUFFIX: Final = ".lock"
_MAX_RECORD_BYTES: Final = 4096


def lock_path(database: Path) -> Path:
    """The lock file of the SQLite database file ``database``: ``<database>.lock``."""
    return database.with_name(database.name + LOCK_SUFFIX)


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a store's lock, as written in its lock file."""

    replica_id: str
    host: str
    pid: int
    since: float  # when it took the lock (Unix seconds)

    def describe(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.since))
        where = f"{self.host}:{self.pid}"
        process = "" if self.replica_id == where else f"process {where}, "
        return f"replica {self.replica_id} ({process}active since {when})"

    def encode(self) -> bytes:
        return (json.dumps(asdict(self)) + "\n").encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> Holder | None:
        """The holder a lock file names; None when it names none (a holder that has just
        locked it and not yet written, or a file that is not ours)."""
        try:
            fields = json.loads(data.decode("utf-8"))
            return cls(str(fields["replica_id"]), str(fields["host"]), int(fields["pid"]),
                       float(fields["since"]))
        except (ValueError, TypeError, KeyError):
            return None


class FileLeadership(RoleEvents):
    """Competes for the exclusive lock of the SQLite database file ``database`` (its
    ``lock_path``) until ``run``'s stop is set."""

    elected = True

    def __init__(self, database: Path, *, replica_id: str | None = None,
                 poll_seconds: float = 1.0,
                 on_change: Callable[[Role], None] | None = None) -> None:
        super().__init__(replica_id or default_replica_id(), poll_seconds, on_change)
        self.database = database
        self.path = lock_path(database)
        self._fd: int | None = None           # the locked file, while this process holds it
        self._holder: Holder | None = None    # who holds it, as this standby last read
        self._told: str | None = None         # what the standby last logged (once each)

    # --- the election ---

    async def run(self, stop: asyncio.Event) -> None:
        try:
            # The first try before the first await: a process that gets the lock starts
            # active, with no standby round before (a flock that does not wait is quick).
            self._set(Role.ACTIVE if self._poll() else Role.STANDBY)
            while not stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.poll_seconds)
                if stop.is_set():
                    break
                held = await asyncio.to_thread(self._poll)
                self._set(Role.ACTIVE if held else Role.STANDBY)
        finally:
            self._set(Role.STANDBY)
            await asyncio.to_thread(self.close)

    def _poll(self) -> bool:
        """One round (it touches the file, never the role): whether this process holds the
        lock now. The active checks that the path still names its file, a standby tries."""
        if self._fd is not None:
            try:
                if _names(self.path, self._fd):
                    return True
            except OSError:  # cannot look (a directory made unreadable): the lock is ours
                return True
            logger.error("replica %s: %s was removed or replaced while this replica held it; "
                         "competing for the file there now", self.replica_id, self.path)
            self._release(clear=False)
        try:
            return self._try_lock()
        except OSError as exc:
            self._tell(f"replica {self.replica_id}: cannot use the lock file {self.path} "
                       f"({exc}); standing by until it can", logging.ERROR)
            return False

    def _try_lock(self) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            won = self._lock(fd)
        except BaseException:
            os.close(fd)
            raise
        if not won:
            os.close(fd)  # never a lock left behind on a file this replica does not keep
            return False
        self._fd, self._holder, self._told = fd, None, None
        return True

    def _lock(self, fd: int) -> bool:
        """Lock ``fd`` and write this replica's record in it; False when another process
        holds it (its record read) or the path no longer names it."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._holder = Holder.decode(os.pread(fd, _MAX_RECORD_BYTES, 0))
            self._tell_holder()
            return False
        if not _names(self.path, fd):  # unlinked after our open: a file nobody else sees
            return False
        me = Holder(self.replica_id, socket.gethostname(), os.getpid(), time.time())
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, me.encode(), 0)
        except OSError as exc:  # the record only names the holder: the lock is what counts
            logger.warning("replica %s: holds %s but cannot write its name in it: %s",
                           self.replica_id, self.path, exc)
        return True

    def _tell_holder(self) -> None:
        who = (self._holder.describe() if self._holder is not None
               else "another process (it has not written its name in the lock file)")
        self._tell(f"replica {self.replica_id}: standing by: the SQLite store {self.database} "
                   f"is in use by {who}, which holds {self.path}; taking over when it exits "
                   f"(trying every {self.poll_seconds:g} s)", logging.WARNING)

    def _tell(self, message: str, level: int) -> None:
        """Log ``message`` once: a standby polls every second, it says each news once."""
        if message != self._told:
            self._told = message
            logger.log(level, "%s", message)

    def _release(self, *, clear: bool) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            if clear:  # the record names no holder once it has gone
                os.ftruncate(fd, 0)
            # LOCK_UN, not only close: a forked child sharing the file would keep the lock.
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def close(self) -> None:
        """Give up the lock (a standby takes over at its next poll)."""
        self._release(clear=True)

    # --- who is active ---

    def active_replica(self) -> str | None:
        """The id of the replica holding the lock: this one, or the one its last poll read
        from the lock file (None: none named)."""
        if self.role is Role.ACTIVE:
            return self.replica_id
        holder = self._holder
        return holder.replica_id if holder is not None else None


def _names(path: Path, fd: int) -> bool:
    """Whether ``path`` names the open file ``fd``."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)
