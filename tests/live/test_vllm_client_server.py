"""Client vs server on a live vLLM: the load generator reads vLLM's per-request metrics
(`--enable-per-request-metrics`, on the session's server) and splits each request's client
TTFT into the engine's queue, its prefill (scheduled -> first token) and what is left: the API
server, the network and the client."""

from __future__ import annotations

import asyncio

import pytest

from monitor.loadgen.metrics import summarize
from monitor.loadgen.runner import Endpoint, Limits, run_load
from monitor.loadgen.workload import RequestSpec
from tests.live.vllm_server import START_TIMEOUT_SECONDS, RunningVllm

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.live_engine,
              pytest.mark.timeout(START_TIMEOUT_SECONDS + 300)]

REQUESTS = 12


def test_client_ttft_splits_into_engine_queue_prefill_and_frontend(vllm: RunningVllm) -> None:
    specs = [RequestSpec(k * 0.1, f"request {k}: a prompt of a few words for the tiny model",
                         8) for k in range(REQUESTS)]
    for chat in (False, True):
        result = asyncio.run(run_load(Endpoint(vllm.url, vllm.model, chat=chat), specs,
                                      Limits(num_requests=REQUESTS), rate=10))
        records = result.records
        assert all(r.ok for r in records), [r.error for r in records if not r.ok]
        for r in records:
            assert r.server_queue is not None and r.server_prefill is not None, \
                "vLLM sent no per-request metrics in the usage chunk"
            assert r.server_queue >= 0 and r.server_prefill > 0
            overhead = r.frontend_overhead
            # The engine's span lies inside the client's: what is left is not negative
            # (a millisecond of slack for the two processes' clocks read at different points).
            assert overhead is not None and overhead > -0.001, (r.ttft, r.server_queue,
                                                                r.server_prefill)
        view = summarize(result, (50.0, 99.0)).server_view
        assert view is not None and view["frontend_overhead"].count == REQUESTS
