"""Sweeps and canaries started from the API: each runs as a task on the service's event loop,
recorded in the store's bench_runs table (``running`` at start, ``done`` or ``failed`` at the
end), where the API reads it back.

One run at a time: two load runs at once would load each other's endpoints and both results
would be wrong, so a second start is refused with 409 while one runs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from sqlalchemy import Engine

from monitor.api.errors import ApiError
from monitor.store.fence import FencedOut
from monitor.store.runs import finish_run, start_run

logger = logging.getLogger(__name__)

Work = Callable[[], Awaitable[Mapping[str, Any]]]


class RunManager:
    def __init__(self, engine: Engine, max_running: int = 1,
                 refuse: Callable[[], str | None] | None = None) -> None:
        self._engine = engine
        self._max_running = max_running
        # Why runs cannot start here now (a standby replica: 503), blocking; None: they can.
        self._refuse = refuse
        self._tasks: dict[str, asyncio.Task[None]] = {}

    @property
    def running(self) -> list[str]:
        return list(self._tasks)

    async def start(self, kind: str, name: str, config: Mapping[str, Any], work: Work) -> str:
        if self._refuse is not None and (why := await asyncio.to_thread(self._refuse)):
            raise ApiError(503, "standby", why)
        if len(self._tasks) >= self._max_running:
            busy = ", ".join(self._tasks)
            raise ApiError(409, "busy", f"run {busy} is still running: one run at a time (two "
                                        "load runs would load each other's endpoints)")
        run_id = await asyncio.to_thread(start_run, self._engine, kind, name, config)
        self._tasks[run_id] = asyncio.create_task(self._run(run_id, kind, work),
                                                  name=f"{kind}-{run_id}")
        return run_id

    async def _run(self, run_id: str, kind: str, work: Work) -> None:
        result: Mapping[str, Any] | None = None
        error: str | None = None
        try:
            result = await work()
        except asyncio.CancelledError:
            error = "cancelled: the monitor stopped during the run"
            raise
        except Exception as exc:  # the run's failure is its result; the service goes on
            logger.warning("%s %s failed: %s", kind, run_id, exc)
            error = f"{type(exc).__name__}: {exc}"
        finally:
            self._tasks.pop(run_id, None)
            try:
                await asyncio.shield(asyncio.to_thread(finish_run, self._engine, run_id,
                                                       result, error))
            except FencedOut:  # the new active has marked it failed already
                logger.warning("%s %s: its outcome is not recorded, this replica lost the "
                               "lock during the run", kind, run_id)

    async def aclose(self) -> None:
        """Cancel what runs; each is recorded as failed (cancelled)."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
