"""Send a workload to an OpenAI-compatible endpoint, streaming, and time every chunk.

Open loop: each request is sent at its intended time whatever the server does, so a slow
server builds a backlog instead of slowing the load (the coordinated-omission trap of closed
loops). ``max_concurrency`` caps requests in flight: in open loop the excess waits on the
client, and that wait is reported as ``queue_time`` apart from the server's latency; with an
infinite rate it is a closed loop of N users.

One dispatcher task sleeps to each intended time and starts a task per request; nothing per
request is created ahead of time, so a long run's memory is its records.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from monitor.loadgen.http_stream import StreamClient, StreamResponse
from monitor.loadgen.workload import RequestSpec


@dataclass(frozen=True, slots=True)
class Endpoint:
    base_url: str
    model: str
    chat: bool = False                 # /v1/chat/completions instead of /v1/completions
    api_key: str | None = None
    timeout_seconds: float = 300.0
    ignore_eos: bool = True            # vLLM/reference extension: generate exactly max_tokens


@dataclass(slots=True)
class RequestRecord:
    index: int
    spec: RequestSpec
    intended_at: float = 0.0           # seconds since the run's start
    sent_at: float = 0.0
    chunk_times: list[float] = field(default_factory=list)
    finished_at: float = 0.0
    status: int = 0
    error_type: str | None = None
    error: str | None = None
    prompt_tokens: int | None = None   # server-reported usage
    num_output_tokens: int = 0         # usage when reported, else chunks received
    usage_reported: bool = False
    warmup: bool = False
    # The engine's own timing of this request, where it sends one (vLLM with
    # --enable-per-request-metrics: the `metrics` object of the usage chunk), in seconds.
    server_queue: float | None = None      # queued -> first scheduled
    server_prefill: float | None = None    # first scheduled -> first token

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error_type is None

    @property
    def queue_time(self) -> float:
        """Time the request waited on the client for a concurrency slot."""
        return self.sent_at - self.intended_at

    @property
    def ttft(self) -> float | None:
        return self.chunk_times[0] - self.sent_at if self.chunk_times else None

    @property
    def e2e(self) -> float:
        return self.finished_at - self.sent_at

    @property
    def itls(self) -> list[float]:
        return [b - a for a, b in zip(self.chunk_times, self.chunk_times[1:])]

    @property
    def tpot(self) -> float | None:
        """vLLM's definition: (E2EL - TTFT) / (output tokens - 1)."""
        ttft = self.ttft
        if ttft is None or self.num_output_tokens < 2:
            return None
        return (self.e2e - ttft) / (self.num_output_tokens - 1)

    @property
    def frontend_overhead(self) -> float | None:
        """Client TTFT minus the engine's queue and prefill: the API server (parsing,
        tokenizing, detokenizing), the network and the client itself."""
        ttft = self.ttft
        if ttft is None or self.server_queue is None or self.server_prefill is None:
            return None
        return ttft - self.server_queue - self.server_prefill

    def to_json(self, wall_start: float) -> dict[str, Any]:
        return {
            "index": self.index, "warmup": self.warmup, "status": self.status,
            "error_type": self.error_type, "error": self.error,
            "intended_at": wall_start + self.intended_at, "sent_at": wall_start + self.sent_at,
            "finished_at": wall_start + self.finished_at, "queue_time": self.queue_time,
            "ttft": self.ttft, "tpot": self.tpot, "e2e": self.e2e,
            "itl": self.itls, "chunk_times": [t - self.sent_at for t in self.chunk_times],
            "prompt_tokens": self.prompt_tokens, "output_tokens": self.num_output_tokens,
            "usage_reported": self.usage_reported, "max_tokens": self.spec.max_tokens,
            "server_queue": self.server_queue, "server_prefill": self.server_prefill,
            "frontend_overhead": self.frontend_overhead,
        }


@dataclass(frozen=True, slots=True)
class Limits:
    """When a run stops and what counts: warm-up first (excluded), then the measured part."""

    duration_seconds: float | None = None      # of the measured part, by intended send time
    num_requests: int | None = None            # measured requests
    warmup_seconds: float = 0.0
    warmup_requests: int = 0
    max_concurrency: int | None = None
    # After the last send, wait this long for answers, then cut the rest ("unfinished"):
    # a saturated server's backlog would otherwise hold a sweep step for minutes.
    drain_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.duration_seconds is None and self.num_requests is None:
            raise ValueError("a run needs a duration or a number of requests")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")


@dataclass(slots=True)
class Progress:
    sent: int = 0
    done: int = 0
    failed: int = 0

    @property
    def in_flight(self) -> int:
        return self.sent - self.done


@dataclass(frozen=True, slots=True)
class RunResult:
    records: list[RequestRecord]
    wall_start: float                  # unix time of offset 0
    measure_start: float               # offset where warm-up ends
    rate: float                        # offered requests/s (inf: closed loop)
    max_concurrency: int | None

    @property
    def measured(self) -> list[RequestRecord]:
        return [r for r in self.records if not r.warmup]


ProgressCallback = Callable[[Progress, float], None]


async def run_load(endpoint: Endpoint, requests: Iterable[RequestSpec], limits: Limits, *,
                   rate: float = math.inf, on_progress: ProgressCallback | None = None,
                   progress_every: float = 0.5) -> RunResult:
    """Send ``requests`` at their ``arrival_seconds`` until ``limits`` say stop; wait for all.

    ``rate`` is only recorded (the arrivals already follow it); inf marks a closed loop, where
    a request's intended time is when its concurrency slot freed, so it has no queue time.
    """
    results = await _run([endpoint], requests, limits, rate,
                         [on_progress] if on_progress else None, progress_every, None)
    return results[0]


async def run_paired(endpoints: Sequence[Endpoint], requests: Iterable[RequestSpec],
                     limits: Limits, *, rate: float,
                     on_progress: Sequence[ProgressCallback] | None = None,
                     progress_every: float = 0.5, seed: int = 0) -> list[RunResult]:
    """The same open-loop requests to every endpoint at the same moments (a canary and its
    baseline). Each request goes to the endpoints in a random order, so that neither side is
    always served first where they share a client or a machine."""
    if math.isinf(rate):
        raise ValueError("paired runs are open loop: give a finite rate")
    return await _run(endpoints, requests, limits, rate, on_progress, progress_every,
                      np.random.default_rng(seed))


@dataclass(slots=True)
class _Side:
    endpoint: Endpoint
    client: StreamClient
    slots: asyncio.Semaphore | None
    progress: Progress = field(default_factory=Progress)
    records: list[RequestRecord] = field(default_factory=list)


async def _run(endpoints: Sequence[Endpoint], requests: Iterable[RequestSpec], limits: Limits,
               rate: float, on_progress: Sequence[ProgressCallback] | None,
               progress_every: float, shuffle: np.random.Generator | None) -> list[RunResult]:
    closed_loop = math.isinf(rate)
    # Objects alive before the load (imports, the workload) go to the permanent generation, so
    # a full collection during the run does not walk them: an unfrozen one over ~350k objects
    # stalled the event loop 100-200 ms, which the p99 read as server latency.
    gc.collect()
    gc.freeze()
    sides = [_Side(e, make_stream_client(e),
                   asyncio.Semaphore(limits.max_concurrency) if limits.max_concurrency else None)
             for e in endpoints]
    tasks: set[asyncio.Task[None]] = set()
    wall_start = time.time()
    start = time.perf_counter()
    warm_end = limits.warmup_seconds
    stop_at = None if limits.duration_seconds is None else warm_end + limits.duration_seconds
    reporters = [asyncio.create_task(_report(side.progress, start, callback, progress_every))
                 for side, callback in zip(sides, on_progress or ())]

    def launch(side: _Side, record: RequestRecord, acquire: bool) -> None:
        side.records.append(record)
        side.progress.sent += 1
        task = asyncio.create_task(_send(side.client, side.endpoint, record, start,
                                         side.slots, side.progress, acquire))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    try:
        measured = 0
        order = list(range(len(sides)))
        for index, spec in enumerate(requests):
            warmup = index < limits.warmup_requests or spec.arrival_seconds < warm_end
            if closed_loop:  # one side; intended when a user (slot) is free: no client queue
                side = sides[0]
                if side.slots is not None:
                    await side.slots.acquire()
                intended = time.perf_counter() - start
                warmup = index < limits.warmup_requests or intended < warm_end
                if not warmup and _reached(limits, measured, intended, stop_at):
                    if side.slots is not None:
                        side.slots.release()
                    break
                launch(side, RequestRecord(index, spec, intended_at=intended, warmup=warmup),
                       acquire=False)
            else:
                if not warmup and _reached(limits, measured, spec.arrival_seconds, stop_at):
                    break
                delay = spec.arrival_seconds - (time.perf_counter() - start)
                if delay > 0:
                    await asyncio.sleep(delay)
                if shuffle is not None:
                    shuffle.shuffle(order)
                for k in order:  # a full concurrency cap queues inside the request's task
                    launch(sides[k], RequestRecord(index, spec, intended_at=spec.arrival_seconds,
                                                   warmup=warmup), acquire=True)
            if not warmup:
                measured += 1
        if tasks:
            _, pending = await asyncio.wait(set(tasks), timeout=limits.drain_seconds)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
    finally:
        for task in tasks:
            task.cancel()
        for reporter in reporters:
            reporter.cancel()
        for side in sides:
            await side.client.aclose()
        gc.unfreeze()
    for side, callback in zip(sides, on_progress or ()):
        callback(side.progress, time.perf_counter() - start)
    results = []
    for side in sides:
        records = side.records
        results.append(RunResult(records, wall_start,
                                 warm_end if warm_end else _first_measured(records),
                                 rate, limits.max_concurrency))
    return results


def _reached(limits: Limits, measured: int, at: float, stop_at: float | None) -> bool:
    if limits.num_requests is not None and measured >= limits.num_requests:
        return True
    return stop_at is not None and at >= stop_at


def _first_measured(records: list[RequestRecord]) -> float:
    return min((r.intended_at for r in records if not r.warmup), default=0.0)


def make_client(endpoint: Endpoint, max_concurrency: int | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    pool = httpx.Limits(max_connections=max_concurrency,
                        max_keepalive_connections=min(max_concurrency or 512, 512))
    timeout = httpx.Timeout(endpoint.timeout_seconds, connect=10.0, pool=None)
    return httpx.AsyncClient(base_url=endpoint.base_url.rstrip("/"), limits=pool,
                             timeout=timeout, headers=headers)


def make_stream_client(endpoint: Endpoint) -> StreamClient:
    """The runner's client for the streamed requests of a run (lighter than httpx's)."""
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    return StreamClient(endpoint.base_url, headers, timeout=endpoint.timeout_seconds)


class EndpointError(ValueError):
    """The endpoint does not answer a one-token request; the message names it."""


async def one_token(client: httpx.AsyncClient, endpoint: Endpoint) -> tuple[int, str, float]:
    """Send a one-token request and read the whole answer: (status, body, seconds taken).
    Raises httpx.HTTPError when the endpoint cannot be reached."""
    path, body = request_body(endpoint, RequestSpec(0.0, "ping", 1))
    began = time.perf_counter()
    async with client.stream("POST", path, json=body) as resp:
        text = (await resp.aread()).decode(errors="replace")
    return resp.status_code, text, time.perf_counter() - began


async def check_endpoint(endpoint: Endpoint) -> None:
    """Send one one-token request; raise EndpointError unless it gets a 200 answer."""
    path, _ = request_body(endpoint, RequestSpec(0.0, "ping", 1))
    where = f"{endpoint.base_url.rstrip('/')}{path}"
    try:
        async with make_client(endpoint, 1) as client:
            status, text, _ = await one_token(client, endpoint)
    except httpx.HTTPError as exc:
        raise EndpointError(f"{where}: not reachable: {type(exc).__name__}: {exc}") from None
    if status != 200:
        raise EndpointError(f"{where}: answered {status} to a one-token request "
                            f"for model {endpoint.model!r}: {text[:200]}")


async def _report(progress: Progress, start: float, callback: ProgressCallback,
                  every: float) -> None:
    while True:
        await asyncio.sleep(every)
        callback(progress, time.perf_counter() - start)


def request_body(endpoint: Endpoint, spec: RequestSpec) -> tuple[str, dict[str, Any]]:
    body: dict[str, Any] = {"model": endpoint.model, "max_tokens": spec.max_tokens,
                            "stream": True, "stream_options": {"include_usage": True}}
    if endpoint.ignore_eos:
        body["ignore_eos"] = True
    if endpoint.chat or spec.messages is not None:
        body["messages"] = list(spec.messages or ({"role": "user", "content": spec.prompt},))
        return "/v1/chat/completions", body
    body["prompt"] = spec.prompt
    return "/v1/completions", body


def error_type_of_status(status: int) -> str:
    """The inferwatch error types (exporters/schema.py) for an HTTP status."""
    if status == 429:
        return "rejected"
    if status in (408, 504):
        return "timeout"
    if status == 400 or status == 422:
        return "bad_request"
    if status == 507:
        return "oom"
    if status >= 500:
        return "server_error"
    return f"http_{status}"


async def _send(client: StreamClient, endpoint: Endpoint, record: RequestRecord,
                start: float, slots: asyncio.Semaphore | None, progress: Progress,
                acquire: bool) -> None:
    path, body = request_body(endpoint, record.spec)
    if acquire and slots is not None:
        try:
            await slots.acquire()
        except asyncio.CancelledError:
            record.error_type, record.error = "unfinished", "still queued on the client"
            record.sent_at = record.finished_at = time.perf_counter() - start
            progress.done += 1
            progress.failed += 1
            raise
    payload = json.dumps(body, separators=(",", ":")).encode()
    record.sent_at = time.perf_counter() - start
    try:
        async with client.stream(path, payload) as resp:
            record.status = resp.status_code
            if resp.status_code != 200:
                record.error_type = error_type_of_status(resp.status_code)
                record.error = (await resp.aread()).decode(errors="replace")[:300]
            else:
                await _read_stream(resp, record, start, endpoint.chat or bool(body.get("messages")))
    except httpx.TimeoutException as exc:
        record.error_type, record.error = "timeout", f"{type(exc).__name__}: {exc}"
    except httpx.ConnectError as exc:
        record.error_type, record.error = "connection", f"ConnectError: {exc}"
    except httpx.HTTPError as exc:   # reset or cut mid-stream
        record.error_type, record.error = "stream_interrupted", f"{type(exc).__name__}: {exc}"
    except asyncio.CancelledError:
        record.error_type, record.error = "unfinished", "no answer before the run ended"
        raise
    finally:
        if not record.finished_at:   # set at the last byte of a whole stream
            record.finished_at = time.perf_counter() - start
        progress.done += 1
        if not record.ok:
            progress.failed += 1
        if slots is not None:
            slots.release()


# A token chunk as vLLM (pydantic, compact JSON) and the reference server write it: a
# non-empty choices array and no usage object. Such chunks are timed without parsing them;
# anything else (usage, errors, chat deltas, spaced JSON) is parsed.
_CHOICES = b'"choices":[{'
_USAGE = b'"usage":{'
# After [DONE], how long the rest of the body (the chunked encoding's last chunk) may take:
# read to its end, the connection goes back to the pool instead of being closed.
DRAIN_SECONDS = 1.0


async def _read_stream(resp: StreamResponse, record: RequestRecord, start: float,
                       chat: bool) -> None:
    """Time the token chunks of an SSE body as their bytes arrive (one clock read per
    network read, before any parsing) and read the body to its end."""
    perf = time.perf_counter
    times = record.chunk_times
    chunks = 0
    tail = b""
    stream = resp.aiter_bytes()
    async for data in stream:
        now = perf() - start
        if tail:
            data = tail + data
        lines = data.split(b"\n")
        tail = lines.pop()                     # a partial line, completed by the next read
        for line in lines:
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if not chat and _CHOICES in payload and _USAGE not in payload:
                times.append(now)
                chunks += 1
                continue
            if payload == b"[DONE]":
                record.finished_at = now
                await _drain(stream)
                _set_output_tokens(record, chunks)
                return
            try:
                event = json.loads(payload)
            except ValueError:
                record.error_type = "bad_response"
                record.error = f"not JSON: {payload[:100].decode(errors='replace')!r}"
                return
            if "error" in event:
                error = event["error"]
                record.error_type = "stream_error"
                record.error = str(error.get("message", error) if isinstance(error, dict)
                                   else error)
                return
            choices = event.get("choices")
            if choices:
                if chat:  # the role-only first delta carries no token
                    content = choices[0].get("delta", {}).get("content")
                    if not content:
                        continue
                times.append(now)
                chunks += 1
            usage = event.get("usage")
            if usage:
                record.prompt_tokens = usage.get("prompt_tokens")
                record.num_output_tokens = int(usage.get("completion_tokens", 0))
                record.usage_reported = True
            metrics = event.get("metrics")
            if isinstance(metrics, dict):
                _read_server_timing(record, metrics)
    record.finished_at = perf() - start        # the body ended without [DONE]
    _set_output_tokens(record, chunks)


def _read_server_timing(record: RequestRecord, metrics: dict[str, Any]) -> None:
    """vLLM's per-request metrics (milliseconds): queue_time_ms is queued -> scheduled,
    time_to_first_token_ms is scheduled -> first token, despite its name."""
    queue, prefill = metrics.get("queue_time_ms"), metrics.get("time_to_first_token_ms")
    if isinstance(queue, int | float) and isinstance(prefill, int | float):
        record.server_queue, record.server_prefill = queue / 1000, prefill / 1000


def _set_output_tokens(record: RequestRecord, chunks: int) -> None:
    if not record.usage_reported:
        record.num_output_tokens = chunks


async def _drain(stream: AsyncIterator[bytes]) -> None:
    """Read what follows [DONE] to the body's end (a server that keeps the stream open past
    DRAIN_SECONDS gets its connection closed instead)."""
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for _ in stream:
                pass
    except TimeoutError:
        pass
