"""A target's load in the four capacity dimensions, read from the store.

- ``requests_per_second``: requests finished plus those rejected at admission, per second;
- ``prompt_tokens_per_second`` and ``output_tokens_per_second``: the token counters' rates;
- ``requests_in_flight``: mean requests running plus waiting (the queue).

When the server falls behind, the rates stop at what it manages while the queue, and so the
requests in flight, keep growing: that dimension shows load past capacity even when KV usage
reads low. ``current_load`` divides by the seconds the window's scrapes cover (a scrape not
yet written does not dilute the rate); ``load_series`` by each step's length, as the other
series of the API do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from exporters import schema
from monitor.collect.derive import derive
from monitor.loadgen.dimensions import Dimension
from monitor.collect.snapshot import GaugeStats, Snapshot, TargetState, split_key
from monitor.store import Selector, Store
from monitor.store.queries import counter_series, gauge_series, window

Load = dict[Dimension, float]


def current_load(store: Store, target: str, start: float, end: float) -> Load:
    """The target's load over (start, end]; every dimension NaN when it did not answer."""
    snapshot = window(store, Selector(target=target), start, end)
    if snapshot.state is not TargetState.UP or snapshot.covered_seconds <= 0:
        return {d: math.nan for d in Dimension}
    derived = derive(snapshot)
    seconds = snapshot.covered_seconds
    rejected = derived.num_errors.get("rejected", 0.0)
    finished = derived.requests_per_second
    return {
        Dimension.REQUESTS: finished + rejected / seconds if not math.isnan(finished)
        else math.nan,
        Dimension.PROMPT_TOKENS: derived.prompt_tokens_per_second,
        Dimension.OUTPUT_TOKENS: derived.generation_tokens_per_second,
        Dimension.IN_FLIGHT: _gauge_mean(snapshot, schema.REQUESTS_RUNNING)
        + derived.queue_depth_mean,
    }


def _gauge_mean(snapshot: Snapshot, name: str) -> float:
    means = [stats.mean for key, stats in snapshot.gauges.items()
             if split_key(key)[0] == name]
    return math.fsum(means) if means else math.nan


def load_series(store: Store, target: str, start: float, end: float,
                step: float) -> list[tuple[float, Load]]:
    """(step end, load) for the steps of (start, end]; NaN where the target did not answer."""
    selector = Selector(target=target)

    def counter(metric: str, where: dict[str, str] | None = None
                ) -> list[tuple[float, float | None]]:
        name = schema.get_spec(metric).exposed_name
        return counter_series(store, selector, name, start, end, step, where)

    finished = counter(schema.REQUESTS)
    rejected = [v for _, v in counter(schema.REQUEST_ERRORS,
                                      {schema.ERROR_TYPE: "rejected"})]
    prompt = [v for _, v in counter(schema.PROMPT_TOKENS)]
    output = [v for _, v in counter(schema.GENERATION_TOKENS)]
    running = [v for _, v in gauge_series(store, selector, schema.REQUESTS_RUNNING, start, end,
                                          step)]
    waiting = [v for _, v in gauge_series(store, selector, schema.REQUESTS_WAITING, start, end,
                                          step)]
    rows: list[tuple[float, Load]] = []
    for k, (t, done) in enumerate(finished):
        seconds = t - finished[k - 1][0] if k else min(step, t - start)
        rows.append((t, {
            Dimension.REQUESTS: _rate([done, rejected[k]], seconds, done),
            Dimension.PROMPT_TOKENS: _rate([prompt[k]], seconds, done),
            Dimension.OUTPUT_TOKENS: _rate([output[k]], seconds, done),
            Dimension.IN_FLIGHT: _mean(running[k]) + _mean(waiting[k], zero=running[k]),
        }))
    return rows


def _rate(increases: Sequence[float | None], seconds: float, answered: float | None) -> float:
    """Summed increases per second; a counter the target lacks counts as none happened while
    it answered (``answered`` is its requests' increase), NaN when it did not answer."""
    if answered is None or seconds <= 0:
        return math.nan
    return math.fsum(v for v in increases if v is not None) / seconds


def _mean(stats: GaugeStats | None, zero: GaugeStats | None = None) -> float:
    if stats is not None and stats.num_readings:
        return stats.mean
    return 0.0 if zero is not None else math.nan
