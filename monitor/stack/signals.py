"""Ctrl-C and SIGTERM over a demo's life: they stop the start, then the run, and never the
shutdown, so that the shutdown always stops every child it started."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    """While installed, the first signal: before ``attach`` raises KeyboardInterrupt (the
    start is unwound), attached to an event loop sets the loop's stop event. Later signals, and
    any while ``stopping``, are only noted: the shutdown carries on."""

    def __init__(self, on_stopping: Callable[[], None] | None = None) -> None:
        self.received: int | None = None
        self.stopping = False
        self._on_stopping = on_stopping
        self._stop: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self._previous: dict[int, Any] = {}

    @property
    def exit_status(self) -> int | None:
        """128 + the signal's number (130 for Ctrl-C), or None if none came."""
        return None if self.received is None else 128 + self.received

    @contextmanager
    def installed(self) -> Iterator[Interrupts]:
        self._previous = {s: signal.signal(s, self._handle) for s in _SIGNALS}
        try:
            yield self
        finally:
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)

    def attach(self, loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
        self._stop = (loop, stop)
        if self.received is not None:  # it came, but its KeyboardInterrupt was swallowed
            stop.set()

    def raise_if_received(self) -> None:
        """KeyboardInterrupt if a signal came: the one raised by ``_handle`` can be lost
        when it lands in code that ignores exceptions (an os.fork at-fork hook such as
        logging's, run by subprocess), so the start checks again after each part."""
        if self.received is not None:
            raise KeyboardInterrupt

    def detach(self) -> None:
        self._stop = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        first = self.received is None
        if first:
            self.received = signum
        if self.stopping or not first:  # a second Ctrl-C must not cut the cleanup short
            if self._on_stopping is not None:
                self._on_stopping()
            return
        if self._stop is not None:
            loop, stop = self._stop
            loop.call_soon_threadsafe(stop.set)  # wakes the loop from its select()
            return
        raise KeyboardInterrupt
