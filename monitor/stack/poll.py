"""Reads what the demo shows from the monitor's API (``inferwatch serve``)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any, Final

import httpx

from monitor.stack.display import Reading, budgets, latest_value

logger = logging.getLogger(__name__)

SERIES: Final = ("tokens_per_second", "batch_utilization", "ttft_p99_seconds")
# The series' last minute in 15 s steps: recent enough to see a fault within one refresh.
WINDOW_SECONDS: Final = 60.0
STEP_SECONDS: Final = 15.0


class ApiError(RuntimeError):
    """The monitor API did not answer as its contract says; the message names the call."""


class MonitorApi:
    """The few calls the demo makes, each with a timeout."""

    def __init__(self, client: httpx.AsyncClient, base_url: str, target: str) -> None:
        self.client = client
        self.base_url = base_url.rstrip("/")
        self.target = target

    async def get(self, path: str, params: Mapping[str, str | float] | None = None) -> Any:
        url = f"{self.base_url}{path}"
        try:
            resp = await self.client.get(url, params=params, timeout=5.0)
        except httpx.HTTPError as exc:
            raise ApiError(f"GET {url}: {type(exc).__name__}: {exc}") from None
        if resp.status_code != 200:
            raise ApiError(f"GET {url}: {resp.status_code} {resp.text[:200]}")
        return resp.json()

    async def series(self, metric: str, now: float) -> float | None:
        body = await self.get(f"/api/v1/targets/{self.target}/series", {
            "metric": metric, "start": now - WINDOW_SECONDS, "end": now,
            "step": STEP_SECONDS})
        return latest_value(body)

    async def items(self, path: str) -> list[dict[str, Any]]:
        body = await self.get(path, {"limit": 1000})
        items: list[dict[str, Any]] = body["items"]
        return items

    async def poll(self) -> tuple[Reading, list[dict[str, Any]]]:
        """The numbers of one refresh, and every alert the monitor knows (for changes)."""
        now = time.time()
        values = await asyncio.gather(*(self.series(m, now) for m in SERIES))
        slos, alerts = await asyncio.gather(self.items("/api/v1/slos"),
                                            self.items("/api/v1/alerts"))
        firing = sum(1 for a in alerts if a.get("state") == "firing")
        return Reading(values[0], values[1], values[2], budgets(slos), firing), alerts
