"""The gateway under load: 200 streams held open at once, each forwarded to its end and
metered exactly once (issue 20: "the gateway holds 200 concurrent streams")."""

from __future__ import annotations

import asyncio
import resource
import time

import aiohttp

from tests.monitor.gateway.conftest import Through

CHAT = "/v1/chat/completions"
STREAMS = 200
CHUNKS = 4


def test_200_concurrent_streams_all_complete_and_are_all_metered(through: Through):
    # Four sockets a stream in this one process (client, gateway in and out, upstream).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < 8 * STREAMS:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(8 * STREAMS, hard), hard))
    script = through.upstream.script
    # Every stream stays open until all have started: a pool capped below 200 (aiohttp's
    # default is 100) would hold the rest back and the peak below would show it.
    script.num_chunks, script.interval, script.pause_after_first = CHUNKS, 0.01, 1.0
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True}

    async def one(session: aiohttp.ClientSession) -> tuple[int, int, bytes]:
        async with session.post(through.url + CHAT, json=body) as response:
            data = await response.read()
        return response.status, data.count(b'"content"'), data[-14:]

    async def send_all() -> list[tuple[int, int, bytes]]:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector,
                                         timeout=aiohttp.ClientTimeout(total=30)) as session:
            return await asyncio.gather(*(one(session) for _ in range(STREAMS)))

    started = time.perf_counter()
    answers = asyncio.run(send_all())
    took = time.perf_counter() - started
    assert [a[0] for a in answers] == [200] * STREAMS
    assert all(tail == b"data: [DONE]\n\n" for _, _, tail in answers)
    client_tokens = sum(a[1] for a in answers)
    assert client_tokens == STREAMS * CHUNKS
    assert through.upstream.peak_streaming == STREAMS, "streams were not all open at once"
    assert (through.upstream.finished, through.upstream.cut) == (STREAMS, 0)
    events = through.wait_events(STREAMS)
    assert [e.outcome for e in events] == ["ok"] * STREAMS
    assert sum(e.timing.num_token_chunks for e in events) == client_tokens
    labels = {"model": "tiny", "tenant": "anonymous", "slo_class": "interactive"}
    assert through.sample("inferwatch_gateway_requests_total", outcome="ok", **labels) == STREAMS
    assert through.sample("inferwatch_gateway_generation_tokens_total", **labels) == client_tokens
    assert took < 10, f"{STREAMS} streams of ~1.1 s took {took:.1f} s"
