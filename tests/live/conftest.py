"""One live vLLM for the live-engine tests (it takes a minute or more to start), stopped once
they are done: package scope, so it does not hold its memory and threads through the rest of
the session's timing-sensitive tests. Likewise one live Triton (pytriton's bundled server) and
one llama.cpp (opt-in: see llamacpp_server)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.live.triton_server import RunningTriton, running_triton
from tests.live.llamacpp_server import RunningLlamaCpp, running_llamacpp
from tests.live.otlp_receiver import SpanReceiver, span_receiver
from tests.live.vllm_server import RunningVllm, running_vllm


@pytest.fixture(scope="package")
def vllm_spans() -> Iterator[SpanReceiver]:
    """The gateway's OTLP receiver, up before the engine that sends it its spans."""
    with span_receiver() as receiver:
        yield receiver


@pytest.fixture(scope="package")
def vllm(vllm_spans: SpanReceiver) -> Iterator[RunningVllm]:
    # Per-request metrics in responses: the client-vs-server split (test_vllm_client_server).
    # A span per finished request to the receiver: every test's traffic (test_vllm_otlp).
    with running_vllm("--enable-per-request-metrics", *vllm_spans.engine_args,
                      port=vllm_spans.engine_port, env=vllm_spans.engine_env) as server:
        yield server


@pytest.fixture(scope="package")
def triton() -> Iterator[RunningTriton]:
    with running_triton() as server:
        yield server


@pytest.fixture(scope="package")
def llamacpp() -> Iterator[RunningLlamaCpp]:
    with running_llamacpp() as server:
        yield server
