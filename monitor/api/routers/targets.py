"""/api/v1/targets: what the monitor scrapes, each target's state, and its metrics over time."""

from __future__ import annotations

import time
from typing import Annotated, Any, Final, Literal

from fastapi import APIRouter, Query

from monitor.anomaly.features import (
    OUTPUT_THROUGHPUT,
    PREFIX_CACHE_HIT_RATIO,
    SCORED,
    THROUGHPUT,
    TOKEN_BUDGET_UTILIZATION,
    batch_utilization_sources,
    read_features,
)
from monitor.api.convert import finite, target_out
from monitor.api.deps import Limit, Offset, StateDep
from monitor.api.errors import bad_request, not_found
from monitor.api.percentiles import PERCENTILE_METRICS, percentile_points
from monitor.api.schemas import ErrorBody, Page, SeriesOut, TargetOut, TargetSummaryOut
from monitor.api.summary import target_summary
from monitor.api.timeparse import parse_range
from monitor.headroom.capacity import CapacityError, headroom, resolve
from monitor.headroom.load import load_series
from monitor.api.state import ServiceState
from monitor.collect.limits import BatchSource

router = APIRouter(prefix="/api/v1/targets", tags=["targets"])

HEADROOM: Final = "headroom_ratio"  # against the target's capacity: block (monitor/headroom)
# Metric -> unit: the anomaly detectors' per-step features, and the headroom.
UNITS: Final[dict[str, str]] = {
    THROUGHPUT: "tokens/s", OUTPUT_THROUGHPUT: "tokens/s", "batch_utilization": "ratio",
    HEADROOM: "ratio", PREFIX_CACHE_HIT_RATIO: "ratio", TOKEN_BUDGET_UTILIZATION: "ratio",
    **{f.name: f.unit or "ratio" for f in SCORED}}
MetricName = Literal[
    "tokens_per_second", "output_tokens_per_second", "offered_requests_per_second",
    "ttft_p99_seconds", "itl_p99_seconds", "e2e_p99_seconds", "kv_cache_usage_ratio",
    "queue_depth", "error_ratio", "gpu_memory_used_bytes", "preemptions_per_second",
    "batch_utilization", "token_budget_utilization", "prefix_cache_hit_ratio",
    "headroom_ratio"]
MAX_POINTS: Final = 11_000  # Prometheus' limit per range query
_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"model": ErrorBody}}
_BAD_OR_NOT_FOUND: dict[int | str, dict[str, Any]] = {**_NOT_FOUND, 400: {"model": ErrorBody}}


@router.get("", response_model=Page[TargetOut], summary="Targets and their last scrape")
def list_targets(state: StateDep, limit: Limit = 100, offset: Offset = 0) -> Page[TargetOut]:
    targets = state.config().targets
    items = [target_out(t, state.scrapes.status(t.name), state.headroom(t.name))
             for t in targets]
    return Page(items=items[offset:offset + limit], total=len(items), limit=limit,
                offset=offset)


@router.get("/{name}", response_model=TargetOut, responses=_NOT_FOUND, summary="One target")
def get_target(state: StateDep, name: str) -> TargetOut:
    target = next((t for t in state.config().targets if t.name == name), None)
    if target is None:
        raise not_found("target", name)
    return target_out(target, state.scrapes.status(name), state.headroom(name))


@router.get("/{name}/summary", response_model=TargetSummaryOut, responses=_BAD_OR_NOT_FOUND,
            summary="The target over a window: token and request counts, gauges, latency "
                    "percentiles with their bucket edges")
def summary(state: StateDep, name: str,
            start: Annotated[str | None, Query(description="unix seconds or ISO 8601; "
                                                           "default: end - 1 h")] = None,
            end: Annotated[str | None, Query(description="default: now")] = None
            ) -> TargetSummaryOut:
    _known(state, name)
    start_s, end_s = parse_range(start, end, time.time(), 3600.0)
    return target_summary(state.store, name, start_s, end_s)


@router.get("/{name}/series", response_model=SeriesOut, responses=_BAD_OR_NOT_FOUND,
            summary="A derived metric of the target per step (null where it did not answer)")
def series(state: StateDep, name: str, metric: MetricName,
           start: Annotated[str | None, Query(description="unix seconds or ISO 8601; "
                                                          "default: end - 1 h")] = None,
           end: Annotated[str | None, Query(description="default: now")] = None,
           step: Annotated[float, Query(ge=1, le=86400 * 31, description="seconds")] = 60.0
           ) -> SeriesOut:
    _known(state, name)
    start_s, end_s = parse_range(start, end, time.time(), 3600.0)
    if (end_s - start_s) / step > MAX_POINTS:
        raise bad_request(f"{(end_s - start_s) / step:.0f} points asked; at most {MAX_POINTS}: "
                          "raise step or shorten the range")
    if metric == HEADROOM:
        points = _headroom_points(state, name, start_s, end_s, step)
    else:
        points = [(t, finite(row[metric]))
                  for t, row in read_features(state.store, name, start_s, end_s, step)]
    estimates = None
    if metric in PERCENTILE_METRICS:
        estimates = percentile_points(state.store, name, metric, [t for t, _ in points], step)
    source = None
    if metric == "batch_utilization":
        source = _latest_batch_source(state, name, points, start_s, end_s, step)
    elif metric == TOKEN_BUDGET_UTILIZATION and any(v is not None for _, v in points):
        source = BatchSource.TOKEN_BUDGET
    return SeriesOut(target=name, metric=metric, unit=UNITS[metric], start=start_s, end=end_s,
                     step=step, points=points, estimates=estimates,
                     batch_utilization_source=source)


def _latest_batch_source(state: ServiceState, name: str,
                         points: list[tuple[float, float | None]], start: float, end: float,
                         step: float) -> BatchSource | None:
    """What the latest point with a value is computed against (a config edit or an engine
    upgrade may change it within the range)."""
    latest = next((t for t, v in reversed(points) if v is not None), None)
    if latest is None:
        return None
    sources = dict(batch_utilization_sources(state.store, name, start, end, step))
    return sources.get(latest)


def _known(state: ServiceState, name: str) -> None:
    """404 unless the target is configured or has stored data."""
    known = {t.name for t in state.config().targets} | {t.name for t in state.store.targets()}
    if name not in known:
        raise not_found("target", name)


def _headroom_points(state: ServiceState, name: str, start: float, end: float,
                     step: float) -> list[tuple[float, float | None]]:
    """The least headroom over the dimensions per step, against today's capacity."""
    target = next((t for t in state.config().targets if t.name == name), None)
    if target is None or target.capacity is None:
        raise bad_request(f"target {name!r} has no capacity: block in the config, so no "
                          "headroom")
    try:
        capacity = resolve(state.store.engine, target.capacity)
    except CapacityError as exc:
        raise bad_request(str(exc)) from None
    return [(t, finite(headroom(load, capacity.values).ratio))
            for t, load in load_series(state.store, name, start, end, step)]
