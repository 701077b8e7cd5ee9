"""A SQLite store holding what a monitor keeps after a month of scraping a few targets, for the
SLO benchmarks (``bench.slo_eval --store``, ``bench.slo_report``), written by the store's own
writer (``monitor.store.writes.write_snapshots``, the function raw writes and rollups use).

Per target: 1-hour rows for ``days`` days and 1-minute rows for the last ``minute_days`` days,
each minute holding requests (finish reason ``stop``), errors by type, and TTFT and end-to-end
latency histograms in the schema's buckets (~100 of them); the rollup watermarks at ``end``.
Raw rows are left out: the first tick and the reports read whole minutes and hours, which
the rollups hold; ``write_raw`` adds 15-second scrapes after ``end`` for steady ticks.
Traffic: ~100 requests a minute per target, 0.05% errors, slow TTFT 0.3% of the time, with
an error burst now and then; the numbers are drawn from a seeded generator.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import delete, insert

from exporters import schema
from monitor.slo.spec import Slo
from monitor.collect.snapshot import HistogramDelta, SeriesKey, Snapshot, TargetState, series_key
from monitor.store import Store, TargetInfo
from monitor.store.models import RollupWatermark
from monitor.store.writes import write_snapshots, write_transaction

MINUTE, HOUR = 60, 3600
END = 1_790_000_000 // HOUR * HOUR  # the last stored minute ends here (a whole hour)
ERROR_TYPES = ("timeout", "oom", "rejected")
TTFT_BOUNDS = schema.get_spec(schema.TIME_TO_FIRST_TOKEN).buckets or ()
E2E_BOUNDS = schema.get_spec(schema.REQUEST_DURATION).buckets or ()
MODEL = {"model": "tiny"}
# (bucket bound the observations land at or below, share of requests)
TTFT_SHAPE = ((0.1, 0.6), (0.2, 0.3), (0.5, 0.097), (1.0, 0.003))
E2E_SHAPE = ((1.0, 0.5), (2.0, 0.4), (5.0, 0.099), (10.0, 0.001))
_BATCH = 2000  # snapshots per transaction


@dataclass(frozen=True, slots=True)
class Fill:
    num_targets: int
    days: int
    minute_days: float
    end: float = END

    def targets(self) -> list[str]:
        return [f"engine-{k}" for k in range(self.num_targets)]

    @staticmethod
    def pool(k: int) -> str:
        return f"pool-{k // 5}"  # five replicas a pool: selectors by label match several


def fill(store: Store, spec: Fill, seed: int = 7) -> int:
    """Writes the month; returns the number of snapshots written."""
    rng = np.random.default_rng(seed)
    for k, name in enumerate(spec.targets()):
        store.register_target(TargetInfo(name, f"http://{name}/metrics", "vllm",
                                          {"pool": Fill.pool(k)}))
    minutes_from = spec.end - round(spec.minute_days * 1440) * MINUTE
    written = 0
    for resolution, start in ((HOUR, spec.end - spec.days * 86_400), (MINUTE, minutes_from)):
        batch: list[Snapshot] = []
        for snapshot in _snapshots(rng, spec.targets(), start, spec.end, resolution):
            batch.append(snapshot)
            if len(batch) == _BATCH:
                written += _write(store, batch, resolution)
                batch = []
        written += _write(store, batch, resolution)
    with write_transaction(store.engine) as conn:
        conn.execute(delete(RollupWatermark))
        conn.execute(insert(RollupWatermark), [{"resolution": r, "watermark": spec.end}
                                               for r in (MINUTE, HOUR)])
    return written


def store_slos(n: int, period: str, num_targets: int) -> list[Slo]:
    """SLOs of the kinds the store serves, by target and by pool, objectives varied."""
    kinds: list[tuple[dict[str, object], bool]] = [
        ({"kind": "availability"}, False),
        ({"kind": "latency", "metric": "ttft", "threshold_seconds": 0.2}, False),
        ({"kind": "latency", "metric": "e2e", "threshold_seconds": 2.0}, False),
        ({"kind": "availability", "errors": ["timeout"]}, True),
        ({"kind": "latency", "metric": "ttft", "threshold_seconds": 0.5}, True),
    ]
    out = []
    for i in range(n):
        sli, by_pool = kinds[i % len(kinds)]
        k = (i // len(kinds)) % num_targets
        selector = {"labels": {"pool": Fill.pool(k)}} if by_pool else {"target": f"engine-{k}"}
        out.append(Slo.model_validate({
            "name": f"{period}-{i}", "objective": (0.999, 0.995, 0.99)[i % 3], "window": period,
            "selector": selector, "sli": sli}))
    return out


def write_raw(store: Store, spec: Fill, seconds: float, seed: int = 8) -> None:
    """Raw 15-second scrapes of every target over (end, end + seconds]."""
    rng = np.random.default_rng(seed)
    store.write(list(_snapshots(rng, spec.targets(), spec.end, spec.end + seconds, 15)))


def _write(store: Store, batch: Sequence[Snapshot], resolution: int) -> int:
    if batch:
        staged = store.ids.copy()
        with write_transaction(store.engine) as conn:
            write_snapshots(conn, staged, batch, resolution)
        store.ids.adopt(staged)
    return len(batch)


def _snapshots(rng: np.random.Generator, targets: Sequence[str], start: float, end: float,
               seconds: int) -> Iterator[Snapshot]:
    num = math.floor((end - start) / seconds)
    scale = seconds / MINUTE
    for target in targets:
        requests = rng.poisson(100 * scale, num).astype(np.float64)
        burst = rng.random(num) < 0.002 / max(scale, 1.0)
        errors = rng.poisson(0.0005 * requests[:, None] / len(ERROR_TYPES),
                             (num, len(ERROR_TYPES))).astype(np.float64)
        errors[burst, 0] += np.floor(requests[burst] / 2)
        for k in range(num):
            t = start + (k + 1) * seconds
            yield _snapshot(target, t - seconds, t, requests[k], errors[k])


def _snapshot(target: str, start: float, end: float, requests: float,
              errors: np.ndarray) -> Snapshot:
    counters: dict[SeriesKey, float] = {
        series_key(schema.get_spec(schema.REQUESTS).exposed_name,
                   {**MODEL, "finish_reason": "stop"}): requests}
    for error_type, n in zip(ERROR_TYPES, errors.tolist(), strict=True):
        counters[series_key(schema.get_spec(schema.REQUEST_ERRORS).exposed_name,
                            {**MODEL, "error_type": error_type})] = n
    return Snapshot(target, start, end, TargetState.UP, counters=counters, histograms={
        series_key(schema.TIME_TO_FIRST_TOKEN, MODEL): _histogram(TTFT_BOUNDS, TTFT_SHAPE,
                                                                  requests),
        series_key(schema.REQUEST_DURATION, MODEL): _histogram(E2E_BOUNDS, E2E_SHAPE,
                                                               requests)})


def _histogram(bounds: Sequence[float], shape: Sequence[tuple[float, float]],
               requests: float) -> HistogramDelta:
    counts = [0.0] * (len(bounds) + 1)
    left = requests
    for bound, share in shape[:-1]:
        n = math.floor(requests * share)
        counts[bounds.index(bound)] += n
        left -= n
    counts[bounds.index(shape[-1][0])] += left
    return HistogramDelta(tuple(bounds), tuple(counts), requests * 0.3, requests)
