"""The samples a canary is judged on, named as in default.yaml.

Per request (from a load run): ``ttft``, ``tpot``, ``e2e`` per successful request and ``itl``
per chunk gap, in seconds. Per interval (fixed-length intervals from the run's start, so
baseline and canary intervals line up): ``<metric>_p99`` over the requests sent in the
interval (when it holds at least ``min_requests``), ``output_tokens_per_second`` (tokens
streamed in the interval, each chunk carrying its share of the request's reported usage),
``requests_per_second`` (finished OK) and ``error_rate`` (failed / sent).

From the store (two targets over the same range): the per-interval values only, read with the
same queries the anomaly detectors use.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from exporters import schema
from monitor.loadgen.metrics import latency_samples
from monitor.loadgen.runner import RequestRecord, RunResult
from monitor.store import Selector, Store
from monitor.store.queries import counter_series

Samples = dict[str, list[float]]
Clusters = dict[str, list[int]]
Lengths = dict[str, list[list[float]]]
PERCENTILE_METRICS = ("ttft", "itl", "tpot", "e2e")


def run_samples(result: RunResult, interval_seconds: float = 10.0,
                min_requests: int = 5) -> tuple[Samples, Clusters]:
    """Every sample of a run: per request, and per interval from its measured start; and
    the interval of each per-request sample (the judge's clusters)."""
    intervals = split_intervals(result.measured, result.measure_start, interval_seconds,
                                min_requests)
    return combine(intervals), clusters(intervals)


def run_judged(result: RunResult, interval_seconds: float = 10.0,
               min_requests: int = 5) -> tuple[Samples, Clusters, Lengths]:
    """``run_samples`` and each per-request sample's (prompt, output) tokens."""
    intervals = split_intervals(result.measured, result.measure_start, interval_seconds,
                                min_requests)
    return combine(intervals), clusters(intervals), lengths(intervals)


@dataclass(frozen=True, slots=True)
class IntervalData:
    per_request: dict[str, list[float]]   # ttft, tpot, e2e, itl of OK requests sent in it
    values: dict[str, float]              # its per-interval metrics; NaN when undefined
    # Per per-request sample, its request's [prompt tokens, output tokens] (NaN unknown);
    # empty when not recorded (samples saved before issue 17).
    lengths: dict[str, list[list[float]]] = field(default_factory=dict)


def split_intervals(records: Sequence[RequestRecord], start: float, interval: float,
                    min_requests: int = 5) -> list[IntervalData]:
    """The records cut into intervals of ``interval`` s from ``start`` by intended send time
    (throughput by when its tokens arrived)."""
    if interval <= 0:
        raise ValueError("the interval must be > 0 s")
    last_sent = max((r.intended_at for r in records), default=start)
    count = max(1, math.ceil((last_sent - start) / interval + 1e-9))
    sent: list[list[RequestRecord]] = [[] for _ in range(count)]
    tokens = np.zeros(count)
    finished = np.zeros(count)
    for r in records:
        k = math.floor((r.intended_at - start) / interval)
        if 0 <= k < count:
            sent[k].append(r)
        if r.ok and 0 <= (j := math.floor((r.finished_at - start) / interval)) < count:
            finished[j] += 1
        if r.chunk_times:
            per_chunk = r.num_output_tokens / len(r.chunk_times)
            for t in r.chunk_times:
                if 0 <= (j := math.floor((t - start) / interval)) < count:
                    tokens[j] += per_chunk
    intervals = []
    for k in range(count):
        ok = [r for r in sent[k] if r.ok]
        per_request = latency_samples(ok)
        sizes = length_samples(ok)
        values = {f"{m}_p99": (float(np.percentile(per_request[m], 99))
                               if len(ok) >= min_requests and per_request[m] else math.nan)
                  for m in PERCENTILE_METRICS}
        values["error_rate"] = (len(sent[k]) - len(ok)) / len(sent[k]) if sent[k] else math.nan
        values["output_tokens_per_second"] = float(tokens[k]) / interval
        values["requests_per_second"] = float(finished[k]) / interval
        intervals.append(IntervalData(per_request, values, sizes))
    return intervals


def length_samples(ok: Sequence[RequestRecord]) -> dict[str, list[list[float]]]:
    """Per sample of ``latency_samples(ok)``, in its order, the request's prompt tokens
    (the server's count, else the workload's intended one, else NaN) and output tokens."""
    def row(r: RequestRecord) -> list[float]:
        prompt = r.prompt_tokens if r.prompt_tokens is not None else r.spec.input_tokens
        return [math.nan if prompt is None else float(prompt), float(r.num_output_tokens)]

    return {
        "ttft": [row(r) for r in ok if r.ttft is not None],
        "tpot": [row(r) for r in ok if r.tpot is not None],
        "itl": [row(r) for r in ok for _ in r.itls],
        "e2e": [row(r) for r in ok],
    }


def combine(intervals: Sequence[IntervalData]) -> Samples:
    """The judge's samples over some intervals: per-request values pooled, per-interval
    values listed (undefined ones left out)."""
    samples: Samples = {m: [] for m in ("ttft", "tpot", "itl", "e2e")}
    for data in intervals:
        for name, values in data.per_request.items():
            samples[name].extend(values)
        for name, value in data.values.items():
            if not math.isnan(value):
                samples.setdefault(name, []).append(value)
    return samples


def clusters(intervals: Sequence[IntervalData]) -> Clusters:
    """The interval index of each per-request sample, in ``combine``'s order: requests
    sent in the same interval met the same state of the server (a stall, a queue), and a
    request's ITL gaps the same batch, so they are not independent samples."""
    labels: Clusters = {m: [] for m in ("ttft", "tpot", "itl", "e2e")}
    for k, data in enumerate(intervals):
        for name, values in data.per_request.items():
            labels[name].extend([k] * len(values))
    return labels


def lengths(intervals: Sequence[IntervalData]) -> Lengths:
    """Each per-request sample's lengths, in ``combine``'s order; a metric is left out when
    any interval lacks them (samples saved without lengths)."""
    rows: Lengths = {m: [] for m in ("ttft", "tpot", "itl", "e2e")}
    for data in intervals:
        for name, values in data.per_request.items():
            if not values:
                continue
            found = data.lengths.get(name)
            if found is None or len(found) != len(values):
                rows.pop(name, None)
            elif name in rows:
                rows[name].extend(found)
    return rows


# store feature -> judge metric name
_FROM_FEATURES = {"ttft_p99_seconds": "ttft_p99", "itl_p99_seconds": "itl_p99",
                  "e2e_p99_seconds": "e2e_p99", "error_ratio": "error_rate"}


def stored_samples(store: Store, target: str, start: float, end: float,
                   step: float) -> Samples:
    """Per-interval values of one target over (start, end] at ``step`` seconds."""
    from monitor.anomaly.features import read_features

    rows = read_features(store, target, start, end, step)
    samples: Samples = {name: [] for name in _FROM_FEATURES.values()}
    for _, row in rows:
        for feature, name in _FROM_FEATURES.items():
            samples[name].append(row.get(feature, math.nan))
    selector = Selector(target=target)
    for metric, name in ((schema.GENERATION_TOKENS, "output_tokens_per_second"),
                         (schema.REQUESTS, "requests_per_second")):
        exposed = schema.get_spec(metric).exposed_name
        points = counter_series(store, selector, exposed, start, end, step)
        samples[name] = [math.nan if v is None else v / step for _, v in points]
    return samples


def bounded_intervals(store: Store, target: str, start: float, end: float,
                      step: float) -> dict[str, tuple[int, int]]:
    """Per stored percentile sample (``ttft_p99``...): how many of the target's intervals
    with data are only a bound or an interval of the engine's buckets, not a number
    (``exporters.buckets.estimate_quantile``: all in the first bucket, in +Inf, or in a
    bucket over 2x wide), and how many have data."""
    from monitor.anomaly.features import read_percentile_estimates

    found: dict[str, tuple[int, int]] = {}
    for feature, name in _FROM_FEATURES.items():
        if not feature.endswith("_p99_seconds"):
            continue
        estimates = read_percentile_estimates(store, target, feature, start, end, step)
        found[name] = (sum(e.is_bound for e in estimates.values()), len(estimates))
    return found
