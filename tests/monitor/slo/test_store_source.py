"""StoreSliSource: SLI events read from what the collector stored (SQLite and PostgreSQL)."""

from __future__ import annotations

from monitor.slo.source import StoreSliSource
from monitor.slo.spec import Slo
from monitor.collect.snapshot import HistogramDelta, Snapshot, TargetState, series_key
from monitor.store import Store
from exporters import schema
from tests.monitor.store.builders import down

T0 = 1_800_000_000.0
TTFT_BOUNDS = schema.get_spec(schema.TIME_TO_FIRST_TOKEN).buckets or ()


def scrape(target: str, end: float, *, stop: float, errors: dict[str, float],
           ttft_fast: float, ttft_slow: float, tokens: float = 0.0) -> Snapshot:
    """15 s of one replica: requests by outcome, errors by type, TTFT split at 0.2 s."""
    counts = [0.0] * (len(TTFT_BOUNDS) + 1)
    counts[TTFT_BOUNDS.index(0.2)] = ttft_fast        # in (prev bound, 0.2]
    counts[TTFT_BOUNDS.index(0.2) + 1] = ttft_slow    # just above 0.2
    model = {"model": "tiny"}
    counters = {series_key("gen_ai_server_requests_total", {**model, "finish_reason": "stop"}):
                stop,
                series_key("gen_ai_server_generation_tokens_total", model): tokens}
    for error_type, n in errors.items():
        counters[series_key("gen_ai_server_request_errors_total",
                            {**model, "error_type": error_type})] = n
    return Snapshot(target, end - 15, end, TargetState.UP, counters=counters, histograms={
        series_key(schema.TIME_TO_FIRST_TOKEN, model): HistogramDelta(
            TTFT_BOUNDS, tuple(counts), 0.0, sum(counts))})


def make(**spec: object) -> Slo:
    return Slo.model_validate({"name": "s", "objective": 0.99, **spec})


def test_latency_and_availability_events_per_minute(store: Store) -> None:
    snapshots = []
    for k in range(1, 9):  # two minutes of two replicas
        for target in ("a", "b"):
            snapshots.append(scrape(target, T0 + 15 * k, stop=10, errors={
                "timeout": 1, "rejected": 2, "bad_request": 4}, ttft_fast=8, ttft_slow=2))
    store.write(snapshots)
    source = StoreSliSource(store)
    latency = source.read(make(sli={"kind": "latency", "metric": "ttft",
                                    "threshold_seconds": 0.2}), T0, T0 + 120, 60)
    assert [(s.end, s.good, s.total, s.has_data) for s in latency] == [
        (T0 + 60, 64.0, 80.0, True), (T0 + 120, 64.0, 80.0, True)]
    # Default counted errors: oom, timeout, model_error, rejected. A 429 (rejected) never
    # reached the engine, so it joins the total; a 400 (bad_request) is not counted at all.
    availability = source.read(make(sli={"kind": "availability"}), T0, T0 + 120, 60)
    per_minute_total = 8 * (10 + 2)
    per_minute_bad = 8 * (1 + 2)
    assert [(s.good, s.total) for s in availability] == [
        (per_minute_total - per_minute_bad, per_minute_total)] * 2
    without_429 = source.read(make(sli={"kind": "availability", "errors": ["timeout"]}),
                              T0, T0 + 120, 120)
    assert [(s.good, s.total) for s in without_429] == [(2 * 8 * 9, 2 * 8 * 10)]


def test_a_minute_with_every_target_down_has_no_data(store: Store) -> None:
    store.write([scrape("a", T0 + 15 * k, stop=1, errors={}, ttft_fast=1, ttft_slow=0)
                 for k in range(1, 5)])
    store.write([down("a", T0 + 60 + 15 * k) for k in range(1, 5)])
    steps = StoreSliSource(store).read(make(sli={"kind": "availability"}), T0, T0 + 180, 60)
    assert [s.has_data for s in steps] == [True, False, False]
    assert [s.total for s in steps] == [4.0, 0.0, 0.0]


def test_a_threshold_the_stored_buckets_lack_counts_at_the_edge_below_not_a_guess(
        store: Store) -> None:
    store.write([Snapshot("a", T0, T0 + 15, TargetState.UP, histograms={
        series_key(schema.TIME_TO_FIRST_TOKEN, {}): HistogramDelta(
            (0.1, 0.25, 0.5), (1.0, 1.0, 1.0, 0.0), 0.0, 3.0)})])
    slo = make(sli={"kind": "latency", "metric": "ttft", "threshold_seconds": 0.2})
    (step,) = StoreSliSource(store).read(slo, T0, T0 + 60, 60)
    assert (step.good, step.total) == (1.0, 3.0)  # at 0.1 s: a lower bound of the SLI


def test_throughput_reads_tokens_and_seconds_with_data(store: Store) -> None:
    store.write([scrape("a", T0 + 15 * k, stop=1, errors={}, ttft_fast=1, ttft_slow=0,
                        tokens=300) for k in range(1, 5)])
    slo = make(objective=0.9, budgeting="Timeslices", timeslice_seconds=60,
               sli={"kind": "throughput", "min_per_second": 10})
    (step,) = StoreSliSource(store).read(slo, T0, T0 + 60, 60)
    assert (step.good, step.total) == (1200.0, 60.0)
