"""The demo's running part: the load, the fault at its time, and the display of what the
monitor sees, until the duration ends, a signal comes, or a part of the stack dies."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any

import httpx

from monitor.loadgen.runner import Progress
from monitor.stack.display import (
    AlertChange,
    Console,
    Reading,
    alert_changes,
    clock,
    format_alert,
    format_status,
)
from monitor.stack.faults import FaultError, FaultPlan, inject
from monitor.stack.launch import Stack
from monitor.stack.load import DemoLoad, LoadShape
from monitor.stack.poll import ApiError, MonitorApi
from monitor.stack.signals import Interrupts


class Driver:
    def __init__(self, stack: Stack, shape: LoadShape, fault: FaultPlan | None,
                 console: Console, interrupts: Interrupts, seed: int = 0,
                 refresh_seconds: float = 2.0) -> None:
        self.stack = stack
        self.shape = shape
        self.fault = fault
        self.console = console
        self.interrupts = interrupts
        self.refresh_seconds = refresh_seconds
        self.load = DemoLoad(stack.reference.url, stack.model, shape, seed)
        self.alerts: dict[str, list[tuple[float, AlertChange]]] = {}  # by fingerprint
        self._known: dict[str, str] = {}
        self._last_api_error = ""
        self._start = 0.0

    @property
    def load_progress(self) -> Progress:
        return self.load.progress

    def elapsed(self) -> float:
        return time.monotonic() - self._start

    def run(self, start: float) -> int:
        """Run until the duration from ``start`` (monotonic) ends; 0, or 1 if a child died."""
        self._start = start
        return asyncio.run(self._run())

    async def _run(self) -> int:
        stop = asyncio.Event()
        self.interrupts.attach(asyncio.get_running_loop(), stop)
        try:
            async with httpx.AsyncClient() as client:
                api = MonitorApi(client, self.stack.monitor.url, self.stack.target)
                watch = asyncio.create_task(self._watch(api))
                tasks = [asyncio.create_task(c) for c in self._background(client)]
                ended = asyncio.create_task(stop.wait())
                timer = asyncio.create_task(asyncio.sleep(self.shape.duration_seconds))
                await asyncio.wait([watch, ended, timer], return_when=asyncio.FIRST_COMPLETED)
                status = watch.result() if watch.done() else 0
                for task in (watch, ended, timer, *tasks):
                    task.cancel()
                await asyncio.gather(watch, ended, timer, *tasks, return_exceptions=True)
                if status == 0:
                    await self._refresh(api)  # the last changes, for the summary
        finally:
            self.interrupts.detach()
        return status

    def _background(self, client: httpx.AsyncClient) -> list[Coroutine[Any, Any, Any]]:
        work: list[Coroutine[Any, Any, Any]] = [self.load.run()]
        if self.fault is not None:
            work.append(self._fault(client, self.fault))
        return work

    async def _fault(self, client: httpx.AsyncClient, plan: FaultPlan) -> None:
        await asyncio.sleep(max(0.0, plan.at_seconds - self.elapsed()))
        try:
            await inject(client, self.stack.reference.url, self.stack.admin_token, plan)
        except FaultError as exc:
            self.console.event(f"[{clock(self.elapsed())}] FAULT    not injected: {exc}")
            return
        self.console.event(f"[{clock(self.elapsed())}] FAULT    injected: {plan.describe()} "
                           "(POST /admin/faults on the reference server)")
        await asyncio.sleep(plan.duration_seconds)
        self.console.event(f"[{clock(self.elapsed())}] FAULT    over: {plan.kind} ended (the "
                           "server ends it); a page resolves once its short window is clean")

    async def _watch(self, api: MonitorApi) -> int:
        """Refresh the display until cancelled; 1 as soon as a child process has died."""
        while True:
            dead = [s for s in self.stack.services() if not s.child.alive()]
            if dead:
                for service in dead:
                    self.console.event(
                        f"inferwatch demo: the {service.name} exited (status "
                        f"{service.child.process.poll()}); its last output:\n"
                        f"{service.child.tail()}")
                return 1
            await self._refresh(api)
            await asyncio.sleep(self.refresh_seconds)

    async def _refresh(self, api: MonitorApi) -> None:
        try:
            reading, alerts = await api.poll()
        except (ApiError, KeyError, TypeError, ValueError) as exc:
            self._api_error(str(exc))
            reading, alerts = Reading(), []
        for change in alert_changes(self._known, alerts):
            at = self.elapsed()
            self.alerts.setdefault(str(change.alert["fingerprint"]), []).append((at, change))
            self.console.event(format_alert(at, change))
        offered = self.shape.rate(self.elapsed())
        self.console.status(format_status(self.elapsed(), offered, reading))

    def _api_error(self, message: str) -> None:
        if message != self._last_api_error:  # once per distinct problem, not every refresh
            self.console.event(f"[{clock(self.elapsed())}] monitor API: {message}")
        self._last_api_error = message

