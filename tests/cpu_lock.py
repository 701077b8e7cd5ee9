"""Keeping the CPU-sensitive tests clear of the `waits` tests when `make test` runs the two
streams side by side (Makefile): the waits tests hold a shared lock on the file named by
$INFERWATCH_TEST_CPU_LOCK while they run, a test that compares two engines started side by side
(the live canary's A/A) holds it exclusively, so it never shares the 2 cores with a waits
test's engines and load (an A/A judged while a third vLLM ran beside it came out
`marginal`). Without the variable (a plain `pytest`, one process) nothing is locked."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

CPU_LOCK_ENV = "INFERWATCH_TEST_CPU_LOCK"


@contextmanager
def cpu_lock(*, exclusive: bool) -> Iterator[None]:
    path = os.environ.get(CPU_LOCK_ENV)
    if not path:
        yield
        return
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
