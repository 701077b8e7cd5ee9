"""Runs the engine loop on its own thread and streams outputs to asyncio callers.

The API thread never touches engine state: adds and aborts go through an inbox the engine
thread drains before each step, and each step's outputs come back to the event loop in
one ``call_soon_threadsafe`` call.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from reference_server.engine import LLMEngine
from reference_server.errors import EngineDead, QueueFull
from reference_server.outputs import RequestOutput
from reference_server.sampling import SamplingParams

logger = logging.getLogger(__name__)

IDLE_WAIT_SECONDS = 0.5


@dataclass(slots=True)
class _Add:
    request_id: str
    prompt_token_ids: list[int]
    sampling: SamplingParams
    arrival_time: float


@dataclass(slots=True)
class _Abort:
    request_id: str


class AsyncEngine:
    def __init__(self, engine: LLMEngine) -> None:
        self.engine = engine
        self._inbox: queue.SimpleQueue[_Add | _Abort] = queue.SimpleQueue()
        self._streams: dict[str, asyncio.Queue[RequestOutput]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._ids = itertools.count()
        self.num_steps = 0

    # --- lifecycle ----------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._thread = threading.Thread(target=self._run_loop, name="engine-loop", daemon=True)
        self._thread.start()

    def shutdown(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # --- requests -----------------------------------------------------------------------------
    def new_request_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}-{time.monotonic_ns():x}"

    def check_admission(self) -> None:
        if not self.is_alive:
            raise EngineDead("the engine loop is not running")
        num_waiting = self.engine.scheduler.num_waiting + self._inbox.qsize()
        if num_waiting >= self.engine.config.max_queue:
            raise QueueFull(f"the waiting queue is full ({num_waiting} requests, "
                            f"--max-queue {self.engine.config.max_queue}); retry later")

    async def generate(
        self, request_id: str, prompt_token_ids: list[int], sampling: SamplingParams,
    ) -> AsyncIterator[RequestOutput]:
        """Stream a request's outputs; closing the iterator early aborts the request."""
        self.check_admission()
        self.engine.validate(prompt_token_ids, sampling)
        stream: asyncio.Queue[RequestOutput] = asyncio.Queue()
        self._streams[request_id] = stream
        self._inbox.put(_Add(request_id, prompt_token_ids, sampling, time.monotonic()))
        self._wake.set()
        finished = False
        try:
            while not finished:
                out = await stream.get()
                finished = out.finished
                yield out
        finally:
            if not finished:
                self._streams.pop(request_id, None)
                self._inbox.put(_Abort(request_id))
                self._wake.set()

    # --- the engine thread --------------------------------------------------------------------
    def _run_loop(self) -> None:
        engine = self.engine
        idle_recorded = False
        while not self._stopping.is_set():
            self._drain_inbox()
            if not engine.has_unfinished_requests():
                if not idle_recorded:
                    engine.record_idle()
                    idle_recorded = True
                self._wait(IDLE_WAIT_SECONDS)
                continue
            idle_recorded = False
            try:
                outputs = engine.step()
            except Exception:  # noqa: BLE001 - the loop must survive a bad step
                logger.exception("engine step crashed outside the model run")
                outputs = engine.fail_all("model_error: internal engine error")
            self.num_steps += 1
            if outputs:
                self._deliver(outputs)
            elif not engine.scheduler.running:
                self._wait_for_schedule()

    def _wait_for_schedule(self) -> None:
        """Nothing ran: sleep until new work or the scheduler's own deadline."""
        wakeup = self.engine.scheduler.next_wakeup(self.engine.clock())
        delay = IDLE_WAIT_SECONDS if wakeup is None else wakeup - self.engine.clock()
        if self.engine.faults.stalled_until() is None and delay > 0:
            self._wait(min(delay, IDLE_WAIT_SECONDS))

    def _wait(self, seconds: float) -> None:
        self._wake.wait(seconds)
        self._wake.clear()

    def _drain_inbox(self) -> None:
        while True:
            try:
                cmd = self._inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(cmd, _Abort):
                self.engine.abort_request(cmd.request_id)
                continue
            try:
                self.engine.add_request(cmd.request_id, cmd.prompt_token_ids, cmd.sampling,
                                        cmd.arrival_time)
            except ValueError as exc:
                self._deliver([RequestOutput(cmd.request_id, finished=True, finish_reason="error",
                                             error_type="bad_request", error_message=str(exc))])

    def _deliver(self, outputs: list[RequestOutput]) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._dispatch, outputs)

    def _dispatch(self, outputs: list[RequestOutput]) -> None:
        for out in outputs:
            stream = self._streams.get(out.request_id)
            if stream is not None:
                stream.put_nowait(out)
                if out.finished:
                    del self._streams[out.request_id]
