"""Which load dimension a sweep found binding, and the capacity in each dimension.

A sweep measures one token mix at rising rates. Its SLO-bounded capacity (the highest rate
at which ``attainment`` of requests met every latency limit) is read in four dimensions, all
at that rate and the mix of the measured step closest below it:

- ``requests_per_second``: the rate itself;
- ``prompt_tokens_per_second``: rate x mean prompt tokens (prefill work);
- ``output_tokens_per_second``: rate x mean output tokens (decode work);
- ``requests_in_flight``: rate x mean end-to-end latency (Little's law): the requests the
  server holds at once, in its batch or its queue (KV blocks and batch slots).

Live load with another mix reaches one of these before the others (long prompts reach the
prefill capacity at a lower request rate), so the monitor's headroom is the least over them.

A step that saturated (its backlog grew) caps the capacity at the rate it achieved, even
where the sweep counted it as meeting the SLO.

The binding dimension is what broke first, judged at the lowest rate that missed the SLO or
saturated:

1. too many requests failed (more than 1 - attainment: 429s, timeouts), or the backlog of
   unanswered requests grew through the step: the server ran out of slots, so
   ``requests_in_flight`` (KV or queue) is binding;
2. else the latency limit most exceeded, each at the percentile the attainment names
   (p99 for 0.99), as a multiple of its limit: TTFT names prefill
   (``prompt_tokens_per_second``), TPOT decode (``output_tokens_per_second``), E2E the
   request rate.

No binding dimension when every rate met the SLO: the capacity is then a lower bound.
The functions read the sweep's JSON (``SweepResult.to_json``, a stored run's result), so they
work on a recorded sweep as well as on one just run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final


class Dimension(StrEnum):
    REQUESTS = "requests_per_second"
    PROMPT_TOKENS = "prompt_tokens_per_second"
    OUTPUT_TOKENS = "output_tokens_per_second"
    IN_FLIGHT = "requests_in_flight"


UNITS: Final[Mapping[Dimension, str]] = {
    Dimension.REQUESTS: "req/s", Dimension.PROMPT_TOKENS: "tokens/s",
    Dimension.OUTPUT_TOKENS: "tokens/s", Dimension.IN_FLIGHT: "requests"}
MEANINGS: Final[Mapping[Dimension, str]] = {
    Dimension.REQUESTS: "request rate", Dimension.PROMPT_TOKENS: "prefill",
    Dimension.OUTPUT_TOKENS: "decode", Dimension.IN_FLIGHT: "KV/queue"}
# The dimension a latency limit stands for when it is the one exceeded most.
LIMIT_DIMENSION: Final[Mapping[str, Dimension]] = {
    "ttft": Dimension.PROMPT_TOKENS, "tpot": Dimension.OUTPUT_TOKENS,
    "e2e": Dimension.REQUESTS}
_LIMIT_NAMES: Final = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "E2E"}
_DESCRIBED: Final = re.compile(r"(TTFT|TPOT|E2E) <= ([0-9.eE+-]+) ms")


@dataclass(frozen=True, slots=True)
class SloLimits:
    """The sweep's per-request latency limits, in seconds."""

    ttft: float | None = None
    tpot: float | None = None
    e2e: float | None = None

    def items(self) -> list[tuple[str, float]]:
        return [(name, value) for name, value in
                (("ttft", self.ttft), ("tpot", self.tpot), ("e2e", self.e2e))
                if value is not None]

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> SloLimits:
        """From ``slo_seconds`` (sweeps since it was recorded), else from the ``slo`` text
        (``TTFT <= 200 ms and TPOT <= 50 ms``)."""
        given = document.get("slo_seconds")
        if isinstance(given, Mapping):
            return cls(**{k: _float_or_none(given.get(k)) for k in ("ttft", "tpot", "e2e")})
        found = {name.lower(): float(ms) / 1000
                 for name, ms in _DESCRIBED.findall(str(document.get("slo", "")))}
        return cls(**found)


@dataclass(frozen=True, slots=True)
class Binding:
    dimension: Dimension | None
    reason: str
    at_rate: float | None = None                 # the rate it was judged at
    pressure: dict[str, float] = field(default_factory=dict)   # limit -> latency / limit


@dataclass(frozen=True, slots=True)
class CapacityProfile:
    """The sweep's capacity per dimension and its binding dimension."""

    max_rate: float
    capacity: dict[Dimension, float]
    binding: Binding
    lower_bound: bool                  # every rate met the SLO: at least this much
    mean_prompt_tokens: float | None
    mean_output_tokens: float | None
    mean_e2e_seconds: float | None

    def to_json(self) -> dict[str, Any]:
        return {"max_rate": self.max_rate,
                "capacity": {str(d): v for d, v in self.capacity.items()},
                "binding": self.binding.dimension.value if self.binding.dimension else None,
                "binding_reason": self.binding.reason, "binding_rate": self.binding.at_rate,
                "pressure": dict(self.binding.pressure), "lower_bound": self.lower_bound,
                "mean_prompt_tokens": self.mean_prompt_tokens,
                "mean_output_tokens": self.mean_output_tokens,
                "mean_e2e_seconds": self.mean_e2e_seconds}


def profile(document: Mapping[str, Any]) -> CapacityProfile | None:
    """The capacity profile of a sweep's JSON; None when it found no capacity."""
    rate = _float_or_none(document.get("max_rate_under_slo"))
    points = _points(document)
    if rate is None or rate <= 0 or not points:
        return None
    rate = min([rate] + [float(p.get("summary", {}).get("request_throughput", rate))
                         for p in points if p.get("saturated") and float(p["rate"]) <= rate])
    near = point_near(points, rate)
    summary = near.get("summary", {})
    prompt = _float_or_none(summary.get("mean_prompt_tokens"))
    output = _float_or_none(summary.get("mean_output_tokens"))
    e2e = _float_or_none((summary.get("latency", {}).get("e2e") or {}).get("mean"))
    capacity = {Dimension.REQUESTS: rate}
    for dimension, per_request in ((Dimension.PROMPT_TOKENS, prompt),
                                   (Dimension.OUTPUT_TOKENS, output),
                                   (Dimension.IN_FLIGHT, e2e)):
        if per_request is not None and per_request > 0:
            capacity[dimension] = rate * per_request
    target = float(document.get("attainment_target", 0.99))
    bound = binding(points, target, SloLimits.of(document))
    return CapacityProfile(rate, capacity, bound, bound.dimension is None, prompt, output, e2e)


def binding(points: Sequence[Mapping[str, Any]], target: float, limits: SloLimits) -> Binding:
    """What broke first, at the lowest rate that missed the SLO (see the module docstring)."""
    ordered = sorted(points, key=lambda p: float(p["rate"]))
    failing = next((p for p in ordered if float(p.get("attainment", 0.0)) < target
                    or p.get("saturated")), None)
    if failing is None:
        top = float(ordered[-1]["rate"]) if ordered else math.nan
        return Binding(None, f"every rate run (up to {top:g} req/s) met the SLO unsaturated: "
                             "nothing was binding yet, the capacity is a lower bound")
    rate = float(failing["rate"])
    summary = failing.get("summary", {})
    requests, failed = int(summary.get("requests", 0)), int(summary.get("failed", 0))
    pressure = pressures(summary, target, limits)
    if requests and failed / requests > 1 - target:
        errors = ", ".join(f"{k} {v}" for k, v in sorted(summary.get("errors", {}).items()))
        return Binding(Dimension.IN_FLIGHT, f"at {rate:g} req/s {failed / requests:.0%} of "
                       f"requests failed ({errors}): the server ran out of slots (KV blocks "
                       "or queue)", rate, pressure)
    if failing.get("saturated"):
        return Binding(Dimension.IN_FLIGHT, f"at {rate:g} req/s the backlog grew "
                       f"{float(failing.get('backlog_slope', 0.0)):.2f} req/s: requests "
                       "queued for KV blocks or batch slots", rate, pressure)
    if not pressure:
        return Binding(Dimension.REQUESTS, f"at {rate:g} req/s the SLO was missed without a "
                       "latency figure to blame: the request rate", rate, pressure)
    worst = max(pressure, key=lambda name: pressure[name])
    described = ", ".join(f"{_LIMIT_NAMES[n]} {v:.2f}x its limit" for n, v in pressure.items())
    return Binding(LIMIT_DIMENSION[worst], f"at {rate:g} req/s {described}: "
                   f"{MEANINGS[LIMIT_DIMENSION[worst]]} bound", rate, pressure)


def pressures(summary: Mapping[str, Any], target: float,
              limits: SloLimits) -> dict[str, float]:
    """Each limit's latency at the attainment's percentile over the limit (1.0: at it)."""
    out: dict[str, float] = {}
    for name, limit in limits.items():
        percentiles = (summary.get("latency", {}).get(name) or {}).get("percentiles") or {}
        value = _percentile_for(percentiles, target * 100)
        if value is not None and limit > 0:
            out[name] = value / limit
    return out


def _percentile_for(percentiles: Mapping[str, float], q: float) -> float | None:
    """The recorded percentile closest to ``q`` (``p99`` for 99)."""
    recorded = [(float(k[1:]), float(v)) for k, v in percentiles.items()
                if k.startswith("p") and v is not None and math.isfinite(float(v))]
    if not recorded:
        return None
    return min(recorded, key=lambda kv: abs(kv[0] - q))[1]


def point_near(points: Sequence[Mapping[str, Any]], rate: float) -> Mapping[str, Any]:
    """The measured step closest below ``rate`` (its mix stands for the capacity's); the
    lowest step if all are above."""
    ordered = sorted(points, key=lambda p: float(p["rate"]))
    below = [p for p in ordered if float(p["rate"]) <= rate + 1e-9]
    return below[-1] if below else ordered[0]


def _points(document: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    points = document.get("points")
    return [p for p in points if isinstance(p, Mapping) and "rate" in p] \
        if isinstance(points, list) else []


def _float_or_none(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def profile_json(document: Mapping[str, Any]) -> dict[str, Any] | None:
    """``profile(document).to_json()``, or None: what a sweep's result records."""
    found = profile(document)
    return found.to_json() if found is not None else None


__all__ = ["Binding", "CapacityProfile", "Dimension", "SloLimits", "binding", "point_near",
           "pressures", "profile", "profile_json"]
