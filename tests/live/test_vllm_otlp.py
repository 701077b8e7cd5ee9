"""OTLP ingest against a live vLLM: the shared engine sends its spans to the gateway's receiver
(``--otlp-traces-endpoint``, see conftest), and every request sent with the real ``openai``
client arrives as one event whose token counts equal the response's usage and whose TTFT and
E2E lie inside the client's."""

from __future__ import annotations

import time

import openai
import pytest

from tests.live.otlp_receiver import SpanReceiver
from tests.live.vllm_server import START_TIMEOUT_SECONDS, RunningVllm

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.live_engine,
              pytest.mark.timeout(START_TIMEOUT_SECONDS + 120)]

NUM_CHAT = 4
# The engine's interval starts when the request reaches it (after the API server parsed and
# tokenized it) and ends at its last token; the client's starts before the HTTP request and
# ends after the last chunk. So the engine's TTFT and E2E are no longer than the client's (a
# millisecond of slack: two processes' clocks), and shorter by the API server's share: 8-94 ms
# per request measured here (the first request after start the most), bounded at 0.5 s.
SLACK_SECONDS = 0.001
MAX_FRONTEND_SECONDS = 0.5


def _within(engine: float | None, client: float, what: str) -> None:
    assert engine is not None, f"no {what} in the span"
    assert -SLACK_SECONDS <= client - engine <= MAX_FRONTEND_SECONDS, (what, engine, client)


def test_each_request_arrives_as_an_event_with_the_clients_usage_and_timing(
        vllm: RunningVllm, vllm_spans: SpanReceiver) -> None:
    client = openai.OpenAI(base_url=f"{vllm.url}/v1", api_key="unused", timeout=60,
                           max_retries=0)
    seen: dict[str, tuple[openai.types.CompletionUsage, float, float]] = {}
    for k in range(NUM_CHAT):
        sent = time.perf_counter()
        first = None
        usage, request_id = None, ""
        for chunk in client.chat.completions.create(
                model=vllm.model, messages=[{"role": "user", "content": f"span test {k}"}],
                max_tokens=6 + k, stream=True, stream_options={"include_usage": True}):
            request_id = chunk.id
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - sent
            usage = chunk.usage or usage
        assert usage is not None and first is not None
        seen[request_id] = (usage, first, time.perf_counter() - sent)
    sent = time.perf_counter()
    whole = client.completions.create(model=vllm.model, prompt="span test", max_tokens=5)
    took = time.perf_counter() - sent
    assert whole.usage is not None
    # vLLM's completions span names the prompt: gen_ai.request.id is the response's id + "-0".
    seen[f"{whole.id}-0"] = (whole.usage, took, took)

    events = vllm_spans.wait_for(seen)
    for request_id, (usage, ttft, e2e) in seen.items():
        event = events[request_id]
        timing = event.timing
        assert (timing.prompt_tokens, timing.completion_tokens) == (
            usage.prompt_tokens, usage.completion_tokens), request_id
        assert (event.model, event.outcome, event.path) == (vllm.model, "ok", "otlp")
        _within(timing.ttft, ttft, "TTFT")
        _within(timing.e2e, e2e, "E2E")
        assert timing.engine_metrics["queue_time_ms"] >= 0
        assert timing.engine_metrics["time_to_first_token_ms"] > 0  # the prefill
    assert vllm_spans.registry.get_sample_value(
        "inferwatch_gateway_otlp_rejected_total", {"reason": "protobuf"}) == 0
