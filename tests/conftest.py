"""Fixtures for every test: the shared CPU lock of the `waits` tests (tests/cpu_lock.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cpu_lock import cpu_lock


@pytest.fixture(autouse=True)
def _waits_share_the_cpu_lock(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("waits") is None:
        yield
        return
    with cpu_lock(exclusive=False):
        yield
