"""Labelled synthetic series shaped like LLM-serving metrics, to evaluate anomaly detectors.

    python -m bench.anomaly_synthetic --out DIR [--seed 0] [--days 14]

One row a minute from a Monday 00:00 UTC. A request rate (``load``) with daily seasonality
(peak mid-afternoon, about 0.6 of it at night), quieter weekends, a slow random walk and a
few benign, unlabelled traffic surges; the metric follows it:

* ``throughput`` (tokens/s, ~2000 at the mean load): proportional to the load;
* ``latency`` (seconds, ~0.8): rising mildly with the load;

each times multiplicative log-normal noise. Anomalies act on the metric only (not on the
load, so a load-aware detector sees them as a break of the metric/load relation), at random
positions after a clean lead-in, never overlapping:

* ``level_shift``: 10-60 min at 0.4-0.65 of normal (latency: 1.6-2.5 times);
* ``spike``: 1-3 rows at 3-6 times normal;
* ``slow_drift``: linear decline to 40-60% below normal over 2-6 h (latency: the inverse
  rise), then immediate recovery (a restart);
* ``variance_change``: noise 4-6 times larger for 30-120 min.

Labels are row intervals (inclusive). :func:`nab_windows` turns them into NAB windows: the
NAB window centred on each anomaly's start (width ``int(0.1 n / k)``, see
:func:`monitor.anomaly.nab.windows_around`), extended on the right to cover the labelled
interval, but to at most one NAB width after the start; overlaps merged.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy.signal import lfilter

from monitor.anomaly.nab import WINDOW_FRACTION, Window, merge_windows

FloatArray = npt.NDArray[np.float64]
Metric = Literal["throughput", "latency"]

START = datetime(2026, 1, 5, tzinfo=UTC).timestamp()  # a Monday
STEP_SECONDS = 60.0
ROWS_PER_DAY = 1440
KINDS = ("level_shift", "spike", "slow_drift", "variance_change")
CLEAN = "clean"

MEAN_RATE = 20.0  # requests/s
TOKENS_PER_REQUEST = 100.0  # -> ~2000 tokens/s at the mean rate
BASE_LATENCY = 0.8  # seconds


@dataclass(frozen=True, slots=True)
class LabelledAnomaly:
    kind: str
    start_index: int
    end_index: int  # inclusive


@dataclass(frozen=True, slots=True)
class LabelledSeries:
    name: str
    timestamps: FloatArray  # unix seconds
    values: FloatArray
    load: FloatArray | None  # requests/s, None when generated without it
    anomalies: list[LabelledAnomaly] = field(default_factory=list)
    metric: Metric = "throughput"


def _load(rng: np.random.Generator, minutes: FloatArray) -> FloatArray:
    hour = (minutes / 60.0) % 24.0
    weekday = (minutes // ROWS_PER_DAY) % 7
    amplitude = rng.uniform(0.2, 0.3)
    daily = 1.0 + amplitude * np.cos(2.0 * np.pi * (hour - 15.0) / 24.0)
    weekly = np.where(weekday >= 5, rng.uniform(0.65, 0.8), 1.0)
    # AR(1) on the log: a few % drifting over hours
    walk: FloatArray = np.asarray(
        lfilter([1.0], [1.0, -0.995], rng.normal(0.0, 0.004, len(minutes))), dtype=np.float64)
    surges = np.ones(len(minutes))
    for _ in range(rng.poisson(0.3 * len(minutes) / ROWS_PER_DAY)):
        start = int(rng.integers(0, len(minutes)))
        surges[start:start + int(rng.integers(30, 121))] *= rng.uniform(1.3, 1.6)
    rate = MEAN_RATE * rng.uniform(0.7, 1.3) * daily * weekly * surges * np.exp(walk)
    return rate * np.exp(rng.normal(0.0, 0.03, len(minutes)))


def _place(rng: np.random.Generator, n: int, count: int, duration: int, lead_in: int,
           gap: int) -> list[int]:
    """Random starts for ``count`` anomalies of up to ``duration`` rows in [lead_in, n - 60),
    ``gap`` rows at least between one's end and the next's start (rejection sampling)."""
    high = n - duration - 60
    if high <= lead_in:
        raise ValueError(f"no room for anomalies: {n} rows, lead-in {lead_in}")
    for _ in range(1000):
        starts = sorted(int(rng.integers(lead_in, high)) for _ in range(count))
        if all(b - a >= duration + gap for a, b in zip(starts, starts[1:])):
            return starts
    raise ValueError(f"cannot place {count} anomalies {gap} rows apart in {n} rows")


def _inject(rng: np.random.Generator, kind: str, metric: Metric, start: int,
            effect: FloatArray, noise_scale: FloatArray) -> int:
    """Apply one anomaly to the multiplicative ``effect``/``noise_scale``; return its last
    row (inclusive)."""
    up = metric == "latency"
    if kind == "level_shift":
        duration = int(rng.integers(10, 61))
        factor = rng.uniform(1.6, 2.5) if up else rng.uniform(0.4, 0.65)
        effect[start:start + duration] *= factor
    elif kind == "spike":
        duration = int(rng.integers(1, 4))
        effect[start:start + duration] *= rng.uniform(3.0, 6.0, duration)
    elif kind == "slow_drift":
        duration = int(rng.integers(120, 361))
        decline = rng.uniform(0.4, 0.6) * np.arange(1, duration + 1) / duration
        effect[start:start + duration] *= 1.0 / (1.0 - decline) if up else 1.0 - decline
    elif kind == "variance_change":
        duration = int(rng.integers(30, 121))
        noise_scale[start:start + duration] *= rng.uniform(4.0, 6.0)
    else:
        raise ValueError(f"unknown anomaly kind {kind!r}; expected one of {KINDS}")
    return start + duration - 1


MAX_DURATION = {"level_shift": 60, "spike": 3, "slow_drift": 360, "variance_change": 120}


def generate(name: str, kind: str = CLEAN, *, seed: int | Sequence[int] = 0, days: float = 14,
             count: int = 2, metric: Metric = "throughput", with_load: bool = True,
             lead_in_days: float = 3.0, start: float = START) -> LabelledSeries:
    """One series with ``count`` anomalies of ``kind`` (none for ``"clean"``), deterministic
    by ``seed``; anomalies start after ``lead_in_days`` and at least 12 h apart."""
    rng = np.random.default_rng(seed)
    n = int(days * ROWS_PER_DAY)
    minutes = np.arange(n, dtype=np.float64)
    load = _load(rng, minutes)
    if metric == "throughput":
        level = TOKENS_PER_REQUEST * rng.uniform(0.8, 1.2) * load
    else:
        level = BASE_LATENCY * rng.uniform(0.8, 1.2) * (0.7 + 0.3 * load / load.mean())
    sigma = rng.uniform(0.03, 0.08)
    effect = np.ones(n)
    noise_scale = np.ones(n)
    anomalies: list[LabelledAnomaly] = []
    if kind != CLEAN:
        if kind not in KINDS:
            raise ValueError(f"unknown anomaly kind {kind!r}; expected one of {KINDS}")
        lead_in = int(lead_in_days * ROWS_PER_DAY)
        starts = _place(rng, n, count, MAX_DURATION[kind], lead_in, gap=720)
        for s in starts:
            end = _inject(rng, kind, metric, s, effect, noise_scale)
            anomalies.append(LabelledAnomaly(kind, s, end))
    values = level * effect * np.exp(rng.normal(0.0, sigma, n) * noise_scale)
    return LabelledSeries(name=name, timestamps=start + minutes * STEP_SECONDS, values=values,
                          load=load if with_load else None, anomalies=anomalies,
                          metric=metric)


def corpus(seed: int = 0, days: float = 14, *, per_kind: int = 4, clean: int = 4,
           count: int = 2, metrics: Sequence[Metric] = ("throughput",),
           with_load: bool = True, lead_in_days: float = 3.0) -> list[LabelledSeries]:
    """``per_kind`` series of each anomaly kind (``count`` anomalies each) and ``clean`` clean
    series, cycling through ``metrics``; named ``<kind>_<i>``."""
    out: list[LabelledSeries] = []
    for k, kind in enumerate((*KINDS, CLEAN)):
        for i in range(clean if kind == CLEAN else per_kind):
            out.append(generate(f"{kind}_{i:02d}", kind, seed=(seed, k, i), days=days,
                                count=count, metric=metrics[i % len(metrics)],
                                with_load=with_load, lead_in_days=lead_in_days))
    return out


def clean_corpus(seed: int = 0, days: float = 14, *, size: int = 8,
                 metrics: Sequence[Metric] = ("throughput",),
                 with_load: bool = True) -> list[LabelledSeries]:
    """Series without anomalies (for false alerts per day), independent of :func:`corpus`."""
    return [generate(f"clean_{i:02d}", CLEAN, seed=(seed, 99, i), days=days,
                     metric=metrics[i % len(metrics)], with_load=with_load)
            for i in range(size)]


def nab_windows(series: LabelledSeries, fraction: float = WINDOW_FRACTION) -> list[Window]:
    """NAB windows for the labelled anomalies: the NAB window centred on each start, extended
    to ``min(end_index, start_index + width)``, clipped to the data, overlaps merged."""
    n = len(series.values)
    if not series.anomalies:
        return []
    width = int(fraction * n / len(series.anomalies))
    windows = []
    for a in series.anomalies:
        if not 0 <= a.start_index <= a.end_index < n:
            raise ValueError(f"anomaly {a} outside the series' rows 0..{n - 1}")
        end = max(a.start_index + width // 2, min(a.end_index, a.start_index + width))
        windows.append(Window(max(a.start_index - width // 2, 0), min(end, n - 1),
                              a.start_index))
    return merge_windows(windows)


def write_csv(series: LabelledSeries, path: str | Path, include_load: bool = False) -> None:
    """``timestamp,value`` rows (unix seconds), plus ``load`` if asked and present."""
    with Path(path).open("w", newline="") as f:
        writer = csv.writer(f)
        with_load = include_load and series.load is not None
        writer.writerow(["timestamp", "value", "load"] if with_load else ["timestamp", "value"])
        columns = [series.timestamps, series.values]
        if with_load and series.load is not None:
            columns.append(series.load)
        for row in zip(*columns):
            writer.writerow([f"{x:.6g}" if i else f"{x:.0f}" for i, x in enumerate(row)])


def labels(series: LabelledSeries) -> dict[str, Any]:
    """The labels of one series as JSON-ready data (anomalies and their NAB windows)."""
    return {
        "metric": series.metric,
        "rows": len(series.values),
        "anomalies": [{"kind": a.kind, "start_index": a.start_index,
                       "end_index": a.end_index,
                       "start_timestamp": float(series.timestamps[a.start_index]),
                       "end_timestamp": float(series.timestamps[a.end_index])}
                      for a in series.anomalies],
        "windows": [[w.start, w.end] for w in nab_windows(series)],
    }


def write_labels(series: LabelledSeries | Sequence[LabelledSeries], path: str | Path) -> None:
    """JSON ``{name: labels(series)}`` for one series or a corpus."""
    items = [series] if isinstance(series, LabelledSeries) else list(series)
    Path(path).write_text(json.dumps({s.name: labels(s) for s in items}, indent=1) + "\n")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--days", type=float, default=14.0)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    series = corpus(args.seed, args.days)
    for s in series:
        write_csv(s, args.out / f"{s.name}.csv", include_load=True)
    write_labels(series, args.out / "labels.json")
    rows = sum(len(s.values) for s in series)
    print(f"{len(series)} series, {rows} rows, "
          f"{sum(len(s.anomalies) for s in series)} anomalies -> {args.out}")


if __name__ == "__main__":
    main()
