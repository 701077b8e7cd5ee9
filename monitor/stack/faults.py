"""The fault the demo injects into the reference server, and when (its admin API:
``POST /admin/faults`` with a bearer token; the server ends the fault itself)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import httpx

# What each kind does at its default value (README, "Fault injection"): enough to burn an
# SLO's budget fast, not enough to need a restart.
DEFAULT_VALUES: Final[dict[str, float]] = {
    "error_rate": 0.5,   # half the requests fail with a model error: burns availability
    "latency": 0.5,      # seconds added to every engine step: TTFT past 500 ms
    "slowdown": 20.0,    # every model run 20x slower
    "kv_squeeze": 0.95,  # 95% of the KV blocks withheld: preemption and queueing
    "stall": 0.0,        # the engine loop stops (value ignored)
}
KINDS: Final = tuple(DEFAULT_VALUES)
# Where the fault lands when --fault-at is not given: after the load has risen a while.
DEFAULT_AT_FRACTION: Final = 0.35


class FaultError(RuntimeError):
    """The server did not take the fault; the message says what it answered."""


@dataclass(frozen=True, slots=True)
class FaultPlan:
    kind: str
    value: float
    at_seconds: float         # offset from the start of the load
    duration_seconds: float

    def __post_init__(self) -> None:
        if self.kind not in DEFAULT_VALUES:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {list(KINDS)}")
        if self.at_seconds < 0 or not self.duration_seconds > 0:
            raise ValueError("a fault needs a start >= 0 s and a duration > 0 s")

    @classmethod
    def for_run(cls, kind: str, run_seconds: float, *, at_seconds: float | None = None,
                duration_seconds: float | None = None, value: float | None = None) -> FaultPlan:
        """The plan for a run of ``run_seconds``: at 35% of it unless told, lasting a tenth
        of it (30 s to 60 s) unless told, at the kind's default value unless told."""
        at = run_seconds * DEFAULT_AT_FRACTION if at_seconds is None else at_seconds
        duration = (min(60.0, max(30.0, run_seconds / 10)) if duration_seconds is None
                    else duration_seconds)
        chosen = DEFAULT_VALUES.get(kind, 0.0) if value is None else value
        return cls(kind, chosen, at, duration)

    def describe(self) -> str:
        value = "" if self.kind == "stall" else f" {self.value:g}"
        return f"{self.kind}{value} for {self.duration_seconds:g} s"

    def body(self) -> dict[str, object]:
        return {"kind": self.kind, "value": self.value,
                "duration_seconds": self.duration_seconds}


async def inject(client: httpx.AsyncClient, base_url: str, token: str, plan: FaultPlan) -> None:
    """Ask the server at ``base_url`` for the fault; FaultError unless it takes it."""
    url = f"{base_url.rstrip('/')}/admin/faults"
    try:
        resp = await client.post(url, json=plan.body(), timeout=10.0,
                                 headers={"Authorization": f"Bearer {token}"})
    except httpx.HTTPError as exc:
        raise FaultError(f"POST {url}: {type(exc).__name__}: {exc}") from None
    if resp.status_code >= 300:
        raise FaultError(f"POST {url}: {resp.status_code} {resp.text[:300]}")
