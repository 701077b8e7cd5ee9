"""Hooks for every test: the shared CPU lock of the `waits` tests (tests/cpu_lock.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cpu_lock import cpu_lock


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A `waits` test holds the shared CPU lock through its setup, call and teardown. Taken
    here, outside pytest-timeout's wrapper (tryfirst), so the time spent waiting for the live
    canary's exclusive hold does not count against the test's own timeout (a 120-s test
    timed out in its setup waiting for two vLLM engines' comparison)."""
    if item.get_closest_marker("waits") is None:
        yield
        return
    with cpu_lock(exclusive=False):
        yield
