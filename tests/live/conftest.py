"""One live vLLM for the live-engine tests (it takes a minute or more to start), stopped once
they are done: package scope, so it does not hold its memory and threads through the rest of
the session's timing-sensitive tests. Likewise one live Triton (pytriton's bundled server) and
one llama.cpp (opt-in: see llamacpp_server)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.live.triton_server import RunningTriton, running_triton
from tests.live.llamacpp_server import RunningLlamaCpp, running_llamacpp
from tests.live.vllm_server import RunningVllm, running_vllm


@pytest.fixture(scope="package")
def vllm() -> Iterator[RunningVllm]:
    # Per-request metrics in responses: the client-vs-server split (test_vllm_client_server).
    with running_vllm("--enable-per-request-metrics") as server:
        yield server


@pytest.fixture(scope="package")
def triton() -> Iterator[RunningTriton]:
    with running_triton() as server:
        yield server


@pytest.fixture(scope="package")
def llamacpp() -> Iterator[RunningLlamaCpp]:
    with running_llamacpp() as server:
        yield server
