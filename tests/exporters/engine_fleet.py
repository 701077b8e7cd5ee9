"""Many simulated vLLM engines in one process: one asyncio loop (in a thread) listening on a
port per engine, each answering GET /metrics with the recorded vLLM page whose request
counters advance with time, so every target is a distinct host:port as in a real fleet.

An engine's counters are functions of (its index, the tick): ``requests_total`` and, on the
faulty engine once the fault started, ``rejections_total``. ``freeze()`` stops the clock, so
a test can compare what storage holds with what the pages say.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final

from tests.exporters.engine_fixtures import FIXTURES_DIR

PAGE_NAME: Final = "vllm-0.32-cpu-live.prom"
# The lines whose values move: finished requests, and admission rejections (the fault).
REQUESTS_LINE: Final = (
    'vllm:request_success_total{engine="0",finished_reason="length",model_name="tiny"} ')
REJECTIONS_LINE: Final = (
    'vllm:admission_rejections_total{model_name="tiny",reason="max_num_queued_reqs"} ')
_HEAD_END: Final = b"\r\n\r\n"


@dataclass
class Traffic:
    """Per tick: finished requests of every engine, rejections of the faulty one."""

    requests_per_tick: int = 10
    rejections_per_tick: int = 50
    tick_seconds: float = 1.0
    started: float = field(default_factory=time.monotonic)
    frozen_tick: int | None = None
    faulty: int | None = None
    fault_tick: int = 0

    def tick(self) -> int:
        if self.frozen_tick is not None:
            return self.frozen_tick
        return int((time.monotonic() - self.started) / self.tick_seconds)

    def requests(self, index: int, tick: int) -> int:
        return 4 + index + self.requests_per_tick * tick  # the page's 4, a per-engine offset

    def rejections(self, index: int, tick: int) -> int:
        if index != self.faulty:
            return 0
        return self.rejections_per_tick * max(0, tick - self.fault_tick)


class PageTemplate:
    """The recorded page with its two moving values cut out, rendered by joining."""

    def __init__(self, text: str) -> None:
        parts: list[str] = []
        rest = text
        for line in (REQUESTS_LINE, REJECTIONS_LINE):
            before, found, after = rest.partition(line)
            if not found:
                raise ValueError(f"{PAGE_NAME} has no line starting {line!r}")
            parts.append(before + line)
            rest = after.split("\n", 1)[1]
        self._parts = (*parts, "\n" + rest)

    def render(self, requests: int, rejections: int) -> str:
        first, second, tail = self._parts
        return f"{first}{requests}.0\n{second}{rejections}.0{tail}"


class EngineFleet:
    """``num_engines`` engines on loopback ports; ``addresses[i]`` is engine i's host:port."""

    def __init__(self, num_engines: int, traffic: Traffic | None = None) -> None:
        self.traffic = traffic or Traffic()
        self.template = PageTemplate((FIXTURES_DIR / PAGE_NAME).read_text(encoding="utf-8"))
        self.num_engines = num_engines
        self.addresses: list[str] = []
        self.num_scrapes = [0] * num_engines
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="engine-fleet",
                                        daemon=True)
        self._servers: list[asyncio.Server] = []

    def page(self, index: int, tick: int | None = None) -> str:
        tick = self.traffic.tick() if tick is None else tick
        return self.template.render(self.traffic.requests(index, tick),
                                    self.traffic.rejections(index, tick))

    def freeze(self) -> int:
        self.traffic.frozen_tick = self.traffic.tick()
        return self.traffic.frozen_tick

    def thaw(self) -> None:
        """Counters go on from where they stood (a counter never goes back)."""
        if self.traffic.frozen_tick is not None:
            self.traffic.started = (time.monotonic()
                                    - self.traffic.frozen_tick * self.traffic.tick_seconds)
            self.traffic.frozen_tick = None

    def start_fault(self, index: int) -> None:
        self.traffic.fault_tick = self.traffic.tick()
        self.traffic.faulty = index

    def start(self) -> EngineFleet:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(30)
        return self

    def stop(self) -> None:
        async def close() -> None:
            for server in self._servers:
                server.close()
            # Closing the listeners leaves kept-alive connections: cancel their handlers.
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _listen(self) -> None:
        for index in range(self.num_engines):
            server = await asyncio.start_server(functools.partial(self._serve, index),
                                                "127.0.0.1", 0)
            self._servers.append(server)
            self.addresses.append(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")

    async def _serve(self, index: int, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        """HTTP/1.1 with keep-alive: GET /metrics gets the page, anything else 404."""
        try:
            while True:
                head = await reader.readuntil(_HEAD_END)
                path = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b""
                if path.split(b"?")[0] == b"/metrics":
                    self.num_scrapes[index] += 1
                    body, status = self.page(index).encode(), b"200 OK"
                else:
                    body, status = b"not found\n", b"404 Not Found"
                writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; "
                             b"version=0.0.4\r\nContent-Length: " + str(len(body)).encode()
                             + _HEAD_END + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()


@contextmanager
def running_fleet(num_engines: int, traffic: Traffic | None = None) -> Iterator[EngineFleet]:
    fleet = EngineFleet(num_engines, traffic).start()
    try:
        yield fleet
    finally:
        fleet.stop()
