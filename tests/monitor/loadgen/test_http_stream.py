"""The load generator's lean HTTP/1.1 client, against a raw asyncio server in the same loop
that writes its answers in pieces of a chosen size: bodies reassembled exactly whatever the
read boundaries, keep-alive reuse, a stale connection retried, failures as httpx's errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import httpx
import pytest

from monitor.loadgen.http_stream import StreamClient
from monitor.loadgen.runner import Endpoint, Limits, RequestRecord, RunResult, run_load
from monitor.loadgen.workload import RequestSpec

Answer = Callable[[bytes], Sequence[bytes]]   # request body -> pieces written, in order
T = TypeVar("T")


HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def chunked(*events: bytes) -> bytes:
    head = HEAD
    return head + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


def split(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


class Server:
    """Answers each request with ``answer(body)``'s pieces, a short pause between them (so
    each is a network read of its own); counts connections; ``close_after`` closes a
    connection after that many answers."""

    def __init__(self, answer: Answer, pause: float = 0.002, close_after: int | None = None
                 ) -> None:
        self.answer, self.pause, self.close_after = answer, pause, close_after
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                body = await reader.readexactly(length)
                for piece in self.answer(body):
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(self.pause)
                served += 1
                if self.close_after is not None and served >= self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()

    async def run(self, client_code: Callable[[str], Awaitable[T]]) -> T:
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with server:
            return await client_code(f"http://127.0.0.1:{port}")


EVENTS = [b'data: {"choices":[{"index":0,"text":"a%d"}],"usage":null}\n\n' % i for i in range(5)]
BODY = b"".join(EVENTS)


@pytest.mark.parametrize("size", [1, 3, 7, 50, 10_000])
def test_a_chunked_body_is_reassembled_whatever_the_reads(size: int) -> None:
    server = Server(lambda _: split(chunked(*EVENTS), size), pause=0.0005)

    async def client(url: str) -> tuple[bytes, int]:
        async with StreamClient(url) as http:
            async with http.stream("/v1/completions", b"{}") as resp:
                body = b"".join([piece async for piece in resp.aiter_bytes()])
            return body, resp.status_code
    assert asyncio.run(server.run(client)) == (BODY, 200)


def test_sized_and_unsized_bodies() -> None:
    sized = b"HTTP/1.1 429 Too Many\r\ncontent-length: 10\r\n\r\n0123456789"
    unsized = b"HTTP/1.1 500 Boom\r\nconnection: close\r\n\r\nsome text"
    answers = iter([split(sized, 4), [unsized]])
    server = Server(lambda _: next(answers), close_after=2)   # closes after the unsized one

    async def client(url: str) -> list[tuple[int, bytes]]:
        out = []
        async with StreamClient(url) as http:
            for _ in range(2):
                async with http.stream("/x", b"{}") as resp:
                    out.append((resp.status_code, await resp.aread()))
        return out
    assert asyncio.run(server.run(client)) == [(429, b"0123456789"), (500, b"some text")]


def test_connections_are_kept_alive_and_a_stale_one_is_retried() -> None:
    server = Server(lambda body: [chunked(body)], close_after=2)

    async def client(url: str) -> list[bytes]:
        bodies = []
        async with StreamClient(url) as http:
            for k in range(5):
                async with http.stream("/x", b'{"k":%d}' % k) as resp:
                    bodies.append(await resp.aread())
        return bodies
    assert asyncio.run(server.run(client)) == [b'{"k":%d}' % k for k in range(5)]
    assert server.connections == 3   # two answers per connection, then the server closed it


def test_failures_raise_httpx_errors() -> None:
    cut = Server(lambda _: [chunked(*EVENTS)[:120]], close_after=1)
    silent = Server(lambda _: [], pause=0.0)

    async def read(url: str, timeout: float = 5.0) -> bytes:
        async with StreamClient(url, timeout=timeout) as http:
            async with http.stream("/x", b"{}") as resp:
                return await resp.aread()
    with pytest.raises(httpx.RemoteProtocolError):
        asyncio.run(cut.run(read))
    with pytest.raises(httpx.ReadTimeout):
        asyncio.run(silent.run(lambda url: read(url, timeout=0.2)))
    with pytest.raises(httpx.ConnectError):
        asyncio.run(read("http://127.0.0.1:9"))
    with pytest.raises(ValueError):
        StreamClient("unix:///tmp/socket")


def _sse(events: Sequence[Any], spaced: bool = False) -> list[bytes]:
    separators = (", ", ": ") if spaced else (",", ":")
    return [b"data: " + (e if isinstance(e, str) else json.dumps(e, separators=separators))
            .encode() + b"\n\n" for e in events]


def _vllm_like(tokens: int) -> list[dict[str, object] | str]:
    events: list[dict[str, object] | str] = [
        {"id": "c", "choices": [{"index": 0, "text": f"t{i}", "finish_reason": None}],
         "usage": None} for i in range(tokens)]
    events.append({"id": "c", "choices": [], "usage": {"prompt_tokens": 7,
                                                       "completion_tokens": tokens}})
    events.append("[DONE]")
    return events


@pytest.mark.parametrize("spaced", [False, True])
def test_runner_times_token_chunks_as_they_arrive_and_reuses_the_connection(
        spaced: bool) -> None:
    # Tokens 0-1 in one network read, 2 alone, 3-4 with the usage chunk and [DONE].
    events = _sse(_vllm_like(5), spaced)
    pieces = [b"".join(events[:2]), events[2], b"".join(events[3:])]

    def frame(data: bytes) -> bytes:
        return b"%x\r\n%s\r\n" % (len(data), data)

    def answer(_: bytes) -> list[bytes]:   # the head with the first read, the end with the last
        return [HEAD + frame(pieces[0]), frame(pieces[1]), frame(pieces[2]) + b"0\r\n\r\n"]
    server = Server(answer, pause=0.01)
    specs = [RequestSpec(0.05 * i, "p", 5) for i in range(3)]

    async def client(url: str) -> RunResult:
        return await run_load(Endpoint(url, "m"), specs, Limits(num_requests=3), rate=20)
    result = asyncio.run(server.run(client))
    assert server.connections == 1
    for r in result.records:
        assert r.ok and r.usage_reported and r.prompt_tokens == 7 and r.num_output_tokens == 5
        times = r.chunk_times
        assert len(times) == 5
        assert times[0] == times[1] and times[3] == times[4]       # same read, same time
        assert times[2] - times[1] >= 0.008 and times[3] - times[2] >= 0.008
        assert r.finished_at >= times[4]
        assert r.e2e == pytest.approx(times[4] - r.sent_at, abs=0.005)


def test_chat_deltas_and_bad_events_are_parsed() -> None:
    chat = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
            *({"choices": [{"index": 0, "delta": {"content": f"w{i}"}}]} for i in range(3)),
            {"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 3}}, "[DONE]"]
    answers = {b"chat": _sse(chat), b"bad": [b"data: {not json\n\n"],
               b"error": _sse([{"error": {"message": "engine step failed"}}])}

    def answer(body: bytes) -> list[bytes]:
        request = json.loads(body)
        key = b"chat" if "messages" in request else request["prompt"].encode()
        return [chunked(*answers[key])]
    server = Server(answer)

    async def client(url: str) -> list[RequestRecord]:
        chat_run = await run_load(Endpoint(url, "m", chat=True), [RequestSpec(0, "q", 3)],
                                  Limits(num_requests=1))
        others = await run_load(Endpoint(url, "m"), [RequestSpec(0, "bad", 3),
                                                      RequestSpec(0, "error", 3)],
                                Limits(num_requests=2))
        return chat_run.records + others.records
    chat_record, bad, error = asyncio.run(server.run(client))
    assert chat_record.ok and len(chat_record.chunk_times) == 3
    assert chat_record.num_output_tokens == 3
    assert bad.error_type == "bad_response"
    assert error.error_type == "stream_error" and error.error == "engine step failed"
