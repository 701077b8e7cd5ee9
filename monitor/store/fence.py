"""The write fence: the writes that only the active replica may make check, inside their own
transaction, that this replica still holds the leadership lock (monitor/service/leader.py).

Why a fence as well as the role: a replica learns that it lost the lock at its next poll (a
second or so; longer on a network that drops packets), and in that gap it still believes it
is active. Without a fence, a write made in that gap (the alert book's state, "sent at" marks,
a run's outcome) could interleave with the new active's. With it:

- every fenced transaction first takes a *shared* transaction-level advisory lock,
  ``FENCE_KEY``, then reads which backend holds the leadership lock and compares it with this
  replica's lock session; if another one holds it (or none does), the transaction fails with
  ``FencedOut`` and writes nothing;
- a replica that wins the leadership lock takes ``FENCE_KEY`` *exclusively* once (and gives it
  back at once) before it calls itself active: it waits for every fenced transaction the old
  active had already begun to commit or roll back. From then on the old active's fenced
  transactions find the lock held by someone else and fail.

So the fenced writes of two replicas never interleave: every one of them is either before
the new active's term or refused. Snapshot writes are not fenced, on purpose: a replica that
scraped through a database outage writes those snapshots whoever is active when the
database returns, and the overlap guard (monitor/store/overlap.py) keeps any row from being
written twice. Rollups and retention are idempotent and row-locked, so they need no fence.

On SQLite (one process, no election) no fence is installed and fenced writes are plain ones.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable

from sqlalchemy import Connection, Engine

# Called inside a fenced transaction, before its first write; raises FencedOut to refuse it.
FenceCheck = Callable[[Connection], None]

_FENCES: weakref.WeakKeyDictionary[Engine, FenceCheck] = weakref.WeakKeyDictionary()


class FencedOut(RuntimeError):
    """This replica no longer holds the leadership lock: the write was refused."""


def install_fence(engine: Engine, check: FenceCheck) -> None:
    """Fence the store on ``engine``: every fenced transaction calls ``check`` first."""
    _FENCES[engine] = check


def remove_fence(engine: Engine) -> None:
    _FENCES.pop(engine, None)


def check_fence(conn: Connection) -> None:
    """Run the fence of ``conn``'s engine, if it has one (inside the open transaction)."""
    check = _FENCES.get(conn.engine)
    if check is not None:
        check(conn)
