"""One live vLLM for the live-engine tests of a session (it takes a minute or more to start)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.live.vllm_server import RunningVllm, running_vllm


@pytest.fixture(scope="session")
def vllm() -> Iterator[RunningVllm]:
    with running_vllm() as server:
        yield server
