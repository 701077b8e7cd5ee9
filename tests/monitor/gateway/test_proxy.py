"""The gateway forwarding to a scripted upstream: streaming without buffering, usage asked
for and stripped, failures turned into clear answers, disconnects passed on."""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from typing import Any

import httpx
import pytest

from prometheus_client import CollectorRegistry

from monitor.gateway import Gateway, GatewayConfig, RequestEvent
from tests.asgi_thread import serving
from tests.monitor.gateway.conftest import SALT, Through

CHAT = "/v1/chat/completions"


def chat_body(stream: bool = True, **extra: object) -> dict[str, object]:
    return {"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
            "stream": stream, **extra}


def data_lines(text: str) -> list[str]:
    return [line[6:] for line in text.splitlines() if line.startswith("data: ")]


def test_the_first_chunk_is_forwarded_before_the_upstream_sends_the_rest(through: Through):
    through.upstream.script.pause_after_first = 1.0
    sent = time.perf_counter()
    with httpx.stream("POST", through.url + CHAT, json=chat_body(), timeout=10) as response:
        chunks = response.iter_bytes()
        first = next(chunks)
        first_at = time.perf_counter() - sent
        rest = b"".join(chunks)
        last_at = time.perf_counter() - sent
    assert b"t0" in first and b"t1" not in first
    assert first_at < 0.5, f"first chunk after {first_at:.3f} s: buffered"
    assert last_at >= 1.0 and b"[DONE]" in rest


def test_a_stream_is_measured_and_the_usage_chunk_the_gateway_asked_for_is_cut(
        through: Through):
    through.upstream.script.num_chunks, through.upstream.script.interval = 4, 0.05
    response = httpx.post(through.url + CHAT, json=chat_body(), timeout=10)
    events = through.wait_events(1)
    payloads = data_lines(response.text)
    assert payloads[-1] == "[DONE]"
    assert all("usage" not in json.loads(p) or json.loads(p)["choices"] for p in payloads[:-1])
    assert len(payloads) == 5  # 4 token chunks and [DONE]: no usage chunk
    assert through.upstream.bodies[0]["stream_options"] == {"include_usage": True}
    timing = events[0].timing
    assert timing.num_token_chunks == 4 and timing.completion_tokens == 4
    assert timing.prompt_tokens == 7 and len(timing.gaps) == 3
    assert all(0.04 < gap < 0.2 for gap in timing.gaps), timing.gaps
    assert events[0].outcome == "ok" and events[0].good


def test_a_client_that_asked_for_usage_gets_the_usage_chunk(through: Through):
    response = httpx.post(through.url + CHAT, timeout=10,
                          json=chat_body(stream_options={"include_usage": True}))
    usage = [json.loads(p) for p in data_lines(response.text)[:-1]
             if json.loads(p).get("usage")]
    assert len(usage) == 1 and usage[0]["usage"]["completion_tokens"] == 5


def test_reasoning_chunks_count_for_ttft_but_not_for_the_first_content_token(
        through: Through):
    script = through.upstream.script
    script.num_reasoning, script.num_chunks, script.interval = 3, 2, 0.1
    httpx.post(through.url + CHAT, json=chat_body(), timeout=10)
    timing = through.wait_events(1)[0].timing
    assert timing.ttft is not None and timing.ttfc is not None
    assert timing.ttfc - timing.ttft == pytest.approx(0.3, abs=0.08)
    assert timing.num_output_tokens == 5


def test_a_non_streaming_request_is_forwarded_with_its_usage_and_engine_metrics(
        through: Through):
    through.upstream.script.metrics = {"queue_time_ms": 3.5, "time_to_first_token_ms": 20.0}
    response = httpx.post(through.url + CHAT, json=chat_body(stream=False), timeout=10)
    assert response.json()["choices"][0]["message"]["content"] == "a b"
    event = through.wait_events(1)[0]
    assert event.timing.completion_tokens == 5 and event.timing.tpot is None
    assert event.timing.engine_metrics == {"queue_time_ms": 3.5, "time_to_first_token_ms": 20.0}
    assert "stream_options" not in through.upstream.bodies[0]


def test_models_and_other_paths_pass_through(through: Through):
    response = httpx.get(through.url + "/v1/models", timeout=10)
    assert response.json()["data"][0]["id"] == "tiny"
    assert httpx.get(through.url + "/nowhere", timeout=10).status_code == 404
    assert through.events == []  # not measured


@pytest.mark.parametrize(("status", "outcome"), [(429, "refused"), (400, "refused"),
                                                 (503, "error")],
                         ids=["rate-limited", "bad-request", "server-error"])
def test_an_upstream_error_reaches_the_client_with_its_status(through: Through, status: int,
                                                              outcome: str):
    through.upstream.script.status = status
    response = httpx.post(through.url + CHAT, json=chat_body(), timeout=10)
    assert response.status_code == status
    assert response.json()["error"]["message"] == "scripted"
    event = through.wait_events(1)[0]
    assert (event.outcome, event.upstream_status, event.good) == (outcome, status, False)


def test_a_dead_upstream_is_a_502_naming_it(through: Through):
    through.gateway.config = type(through.gateway.config)(
        "http://127.0.0.1:9", through.gateway.config.tenant_salt)  # nothing listens on port 9
    through.gateway._client = None
    response = httpx.post(through.url + CHAT, json=chat_body(), timeout=10)
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["type"] == "upstream_unreachable" and "http://127.0.0.1:9" in error["message"]
    assert through.wait_events(1)[0].outcome == "error"


def test_a_silent_upstream_is_a_504_after_the_timeout(through_short_timeout: Through):
    through = through_short_timeout
    # Past the 0.5 s timeout, and short: uvicorn on httptools waits for this handler to end
    # before the upstream's test server stops.
    through.upstream.script.answer_delay = 1.5
    sent = time.perf_counter()
    response = httpx.post(through.url + CHAT, json=chat_body(), timeout=10)
    assert response.status_code == 504 and time.perf_counter() - sent < 2.0
    assert response.json()["error"]["type"] == "upstream_timeout"
    assert through.wait_events(1)[0].outcome == "timeout"


def test_an_upstream_silent_mid_stream_ends_the_stream_with_an_error_event(
        through_short_timeout: Through):
    through = through_short_timeout
    through.upstream.script.pause_after_first = 3.0
    response = httpx.post(through.url + CHAT, json=chat_body(), timeout=10)
    last = json.loads(data_lines(response.text)[-1])
    assert response.status_code == 200 and last["error"]["type"] == "upstream_timeout"
    assert through.wait_events(1)[0].outcome == "timeout"


def test_a_client_that_disconnects_mid_stream_aborts_the_upstream_request(through: Through):
    through.upstream.script.pause_after_first = 5.0
    with httpx.stream("POST", through.url + CHAT, json=chat_body(), timeout=10) as response:
        next(response.iter_bytes())  # the first chunk, then hang up
    deadline = time.monotonic() + 3
    while through.upstream.cut == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert (through.upstream.cut, through.upstream.finished) == (1, 0)
    event = through.wait_events(1)[0]
    assert event.outcome == "cancelled" and not event.good


def test_chunks_of_a_kept_alive_connection_are_not_held_back(through: Through):
    # Without TCP_NODELAY on accepted sockets, Nagle held each chunk after the first of a
    # reused connection until the client's delayed ACK: the chunks arrived in one lump.
    through.upstream.script.num_chunks, through.upstream.script.interval = 4, 0.05
    with httpx.Client(timeout=10) as client:
        for _ in range(3):
            arrivals: list[float] = []
            with client.stream("POST", through.url + CHAT, json=chat_body()) as response:
                for data in response.iter_raw():
                    arrivals += [time.perf_counter()] * data.count(b"data: {")
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    assert len(gaps) == 3 and min(gaps) > 0.03, gaps


def test_upstream_connections_are_kept_alive_across_requests(through: Through):
    # A stream read to its end gives its connection back to the pool: one connection
    # serves requests one after another, streamed or not, errors included.
    for stream in (True, False, True, True):
        assert httpx.post(through.url + CHAT, json=chat_body(stream), timeout=10).is_success
    through.upstream.script.status = 429
    assert httpx.post(through.url + CHAT, json=chat_body(), timeout=10).status_code == 429
    through.upstream.script.status = 200
    assert httpx.post(through.url + CHAT, json=chat_body(), timeout=10).is_success
    assert len(through.upstream.peers) == 6 and len(set(through.upstream.peers)) == 1, \
        through.upstream.peers


def test_concurrent_requests_are_each_counted_once_as_ok(through: Through):
    # uvicorn answers receive() with http.disconnect as soon as a response is complete: the
    # disconnect watcher must not take that for a client going away.
    through.upstream.script.num_chunks = 3

    async def send_all() -> None:
        async with httpx.AsyncClient(timeout=10) as client:
            async def one() -> None:
                async with client.stream("POST", through.url + CHAT,
                                         json=chat_body()) as response:
                    async for _ in response.aiter_raw():
                        pass
            await asyncio.gather(*(one() for _ in range(60)))

    asyncio.run(send_all())
    events = through.wait_events(60)
    assert [e.outcome for e in events] == ["ok"] * 60
    assert through.sample("inferwatch_gateway_requests_total", model="tiny",
                          tenant="anonymous", slo_class="interactive", outcome="ok") == 60


def test_an_error_event_mid_stream_is_an_error_not_ok(through: Through):
    through.upstream.script.error_after = 2
    response = httpx.post(through.url + CHAT, json=chat_body(), timeout=10)
    assert json.loads(data_lines(response.text)[-2])["error"]["type"] == "server_error"
    event = through.wait_events(1)[0]
    assert (event.outcome, event.timing.stream_error, event.good) == (
        "error", "server_error", False)


def test_a_compressed_stream_passes_unread_and_is_still_counted():
    # An upstream that gzips its stream although the gateway asked for identity.
    compressed = gzip.compress(b'data: {"choices": [{"delta": {"content": "x"}}]}\n\n'
                               b"data: [DONE]\n\n")

    async def gzipping(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream"), (b"content-encoding", b"gzip")]})
        await send({"type": "http.response.body", "body": compressed})

    events: list[RequestEvent] = []
    with serving(gzipping) as upstream_url:
        gateway = Gateway(GatewayConfig(upstream_url, SALT), CollectorRegistry(),
                          sinks=[events.append])
        with serving(gateway) as url:
            response = httpx.post(url + CHAT, json=chat_body(), timeout=10)
            assert response.status_code == 200 and "[DONE]" in response.text  # httpx gunzips
            deadline = time.monotonic() + 5
            while not events and time.monotonic() < deadline:
                time.sleep(0.01)
    assert events[0].outcome == "ok" and events[0].timing.ttft is not None
