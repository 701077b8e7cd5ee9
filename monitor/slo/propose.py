"""A proposed SLO file from a measured capacity: what a sweep held becomes what is promised.

From a sweep's JSON (``SweepResult.to_json``: a ``sweep.json`` or a stored run's result):

- one latency SLO per limit the sweep held (TTFT, TPOT, E2E), at that limit (raised to the
  next bucket bound of the histogram when it is not one, so good requests are counted
  exactly) with the sweep's attainment as the objective;
- an availability SLO;

in inferwatch's native form, headed by comments that give what was measured: the max rate
under the SLO, the knee, the saturation rate, the binding dimension and why, the capacity per
dimension at the sweep's length mix, a capacity note (what one replica should be planned for
at ``target_utilization`` of it, and the replicas for a peak with ``monitor.loadgen.capacity``),
and the ``capacity:`` block that gives a target in inferwatch.yaml its live headroom.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import yaml

from exporters.adapters.edges import SCHEMA_ENGINE, engine_edges
from monitor.loadgen.capacity import CapacityInputs, CapacityPlan, plan
from monitor.loadgen.dimensions import (
    MEANINGS,
    UNITS,
    CapacityProfile,
    Dimension,
    SloLimits,
    profile,
)
from monitor.slo.spec import DEFAULT_COUNTED_ERRORS, LATENCY_METRICS

_WHAT: Final = {"ttft": "get their first token within", "tpot": "stream at most",
                "e2e": "complete within"}
_PER: Final = {"ttft": "", "tpot": " per output token", "e2e": ""}


class ProposeError(ValueError):
    """A sweep that cannot become an SLO file (no capacity found, no latency limit)."""


@dataclass(frozen=True, slots=True)
class ProposeOptions:
    name: str = "inference"                      # prefix of the SLO names
    objective: float | None = None               # None: the sweep's attainment target
    availability_objective: float = 0.999
    window: str = "30d"
    engine: str | None = None                    # whose bucket edges (None: the schema's)
    target_utilization: float = 0.7              # plan replicas for this much of capacity
    peak_qps: float | None = None
    redundancy: int = 1
    prefill_weight: float = 0.1

    def __post_init__(self) -> None:
        for label, value in (("objective", self.objective),
                             ("availability objective", self.availability_objective)):
            if value is not None and not 0 < value < 1:
                raise ProposeError(f"{label} must be in (0, 1), got {value:g}")
        if not 0 < self.target_utilization <= 1:
            raise ProposeError("the headroom target (utilization) must be in (0, 1]")


@dataclass(frozen=True, slots=True)
class SweepSource:
    """Where the sweep came from, for the header and the ``capacity:`` block."""

    description: str                 # "sweep 3f2c... (nightly) of tiny at http://..."
    reference: str | None = None     # a run id or name the monitor can find in the store


def bucket_bound(metric: str, seconds: float, engine: str | None = None) -> float:
    """The smallest bucket edge of ``metric``'s histogram at or above ``seconds``, on
    ``engine`` (its default edges, ``exporters/adapters/latency_edges.yaml``; None: the
    inferwatch schema's): a threshold the engine can count exactly."""
    known = engine_edges(engine or SCHEMA_ENGINE)
    buckets = known.edges(LATENCY_METRICS[metric])
    if buckets is None:
        raise ProposeError(f"{known.name} has no {LATENCY_METRICS[metric]} histogram: a "
                           f"{metric} SLO cannot be counted on it (--engine)")
    above = [b for b in buckets if b >= seconds * (1 - 1e-9)]
    if not above:
        raise ProposeError(f"{metric} limit {seconds:g}s is past the last edge of "
                           f"{known.name}'s histogram")
    return min(above)


def slo_name(text: str) -> str:
    """A usable SLO name prefix from a run name or model: lower case, '-' for the rest."""
    name = re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-._")
    return name or "inference"


def proposed_slos(document: Mapping[str, Any], options: ProposeOptions,
                  rate: float) -> list[dict[str, Any]]:
    """The SLO entries (native form) for the sweep's limits, held up to ``rate``, and an
    availability SLO."""
    limits = SloLimits.of(document)
    if not limits.items():
        raise ProposeError("the sweep records no latency limit (TTFT, TPOT or E2E)")
    objective = options.objective or float(document.get("attainment_target", 0.99))
    slos: list[dict[str, Any]] = []
    for metric, limit in limits.items():
        bound = bucket_bound(metric, limit, options.engine)
        sli: dict[str, Any] = {"kind": "latency", "metric": metric, "threshold_seconds": bound}
        if options.engine is not None:
            sli["engine"] = options.engine
        raised = (f"; the {limit * 1000:g} ms held raised to the engine's next edge"
                  if abs(bound - limit) > 1e-9 * limit else "")
        slos.append({
            "name": f"{options.name}-{metric}",
            "description": (f"{_percent(objective)} of requests {_WHAT[metric]} "
                            f"{bound * 1000:g} ms{_PER[metric]} (held up to {rate:.3g} req/s "
                            f"in the sweep{raised})"),
            "sli": sli, "objective": objective, "window": options.window})
    slos.append({
        "name": f"{options.name}-availability",
        "description": (f"{_percent(options.availability_objective)} of requests finish "
                        "without "
                        f"{', '.join(DEFAULT_COUNTED_ERRORS)}"),
        "sli": {"kind": "availability", "errors": list(DEFAULT_COUNTED_ERRORS)},
        "objective": options.availability_objective, "window": options.window})
    return slos


def capacity_plan(found: CapacityProfile, options: ProposeOptions) -> CapacityPlan | None:
    if options.peak_qps is None:
        return None
    return plan(CapacityInputs(
        replica_max_qps=found.max_rate,
        measured_input_tokens=found.mean_prompt_tokens or 0.0,
        measured_output_tokens=found.mean_output_tokens or 0.0, peak_qps=options.peak_qps,
        target_utilization=options.target_utilization, redundancy=options.redundancy,
        prefill_weight=options.prefill_weight))


def header(document: Mapping[str, Any], found: CapacityProfile, source: SweepSource,
           options: ProposeOptions) -> list[str]:
    """The comment lines above the SLOs: the measurement and the capacity note."""
    target = float(document.get("attainment_target", 0.99))
    knee, saturation = document.get("knee_rate"), document.get("saturation_rate")
    lines = [f"Proposed by `inferwatch slo propose` from {source.description}.",
             f"Measured max rate under the SLO ({_percent(target)} of requests within "
             f"{document.get('slo', '?')}): {found.max_rate:.3g} req/s"
             + (" (a lower bound: every rate met the SLO)" if found.lower_bound else ""),
             f"Knee: {_rate(knee)}; saturation: {_rate(saturation)}",
             "Binding dimension: " + (f"{found.binding.dimension} "
                                      f"({MEANINGS[found.binding.dimension]})"
                                      if found.binding.dimension else "none"),
             f"  {found.binding.reason}",
             f"Capacity per replica at the sweep's mix (mean {_tokens(found.mean_prompt_tokens)}"
             f" prompt, {_tokens(found.mean_output_tokens)} output tokens per request):"]
    lines += [f"  {d.value}: {v:.4g} {UNITS[d]}" for d, v in found.capacity.items()]
    lines += capacity_note(found, options)
    lines += ["Live headroom: give the target in inferwatch.yaml", "  " + capacity_block(
        found, source)]
    return lines


def capacity_block(found: CapacityProfile, source: SweepSource) -> str:
    """The target's ``capacity:`` line: the stored sweep, or its numbers."""
    if source.reference:
        return f"capacity: {{sweep: {source.reference}}}"
    numbers = ", ".join(f"{d.value}: {v:.4g}" for d, v in found.capacity.items())
    return f"capacity: {{{numbers}}}"


def capacity_note(found: CapacityProfile, options: ProposeOptions) -> list[str]:
    u = options.target_utilization
    sustained = {d: v * u for d, v in found.capacity.items()}
    lines = [f"Capacity note: plan a replica for {u:.0%} of that: "
             f"{sustained[Dimension.REQUESTS]:.3g} req/s"
             + "".join(f", {sustained[d]:.4g} {label}" for d, label in (
                 (Dimension.PROMPT_TOKENS, "prompt tokens/s"),
                 (Dimension.OUTPUT_TOKENS, "output tokens/s")) if d in sustained)]
    planned = capacity_plan(found, options)
    if planned is not None:
        lines.append(f"  peak {options.peak_qps:g} req/s: {planned.replicas_for_peak} "
                     f"replica(s), {planned.replicas} with N+{options.redundancy} "
                     f"({planned.utilization_at_peak:.0%} utilized at peak)")
    return lines


def propose(document: Mapping[str, Any], source: SweepSource,
            options: ProposeOptions = ProposeOptions()) -> str:
    """The SLO file's text: comments on the measurement, then ``slos:``."""
    found = profile(document)
    if found is None:
        raise ProposeError("the sweep found no rate that met the SLO: nothing to propose "
                           "(rerun it from a lower --start-rate)")
    slos = proposed_slos(document, options, found.max_rate)
    body: str = yaml.safe_dump({"slos": slos}, sort_keys=False, default_flow_style=None,
                               width=100)
    comments = "".join(f"# {line}".rstrip() + "\n"
                       for line in header(document, found, source, options))
    return comments + body


def _rate(value: Any) -> str:
    return f"{float(value):.3g} req/s" if value is not None else "not reached"


def _tokens(value: float | None) -> str:
    return f"{value:.4g}" if value is not None else "?"


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.6g}%"
