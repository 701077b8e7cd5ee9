"""Reading many SLOs at once (``StoreSliSource.read_many``, each metric once for all targets)
gives the same steps as reading each SLO on its own, and the evaluator the same statuses."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from exporters import schema
from monitor.slo import evaluator
from monitor.slo.evaluator import SloEvaluator
from monitor.slo.report import build_report
from monitor.slo.source import Step, StoreSliSource
from monitor.slo.spec import Slo
from monitor.collect.snapshot import HistogramDelta, Snapshot, TargetState, series_key
from monitor.store import Store, TargetInfo
from tests.monitor.store.builders import down

T0 = 1_800_000_000.0  # a whole hour
HOUR = 3600.0
TTFT_BOUNDS = schema.get_spec(schema.TIME_TO_FIRST_TOKEN).buckets or ()
MODEL = {"model": "tiny"}


class OneAtATime:
    """The store source as the evaluator read it before bulk reads: ``read`` per SLO only."""

    def __init__(self, store: Store) -> None:
        self.source = StoreSliSource(store)

    def read(self, slo: Slo, start: float, end: float, step: float) -> Sequence[Step]:
        return self.source.read(slo, start, end, step)

    def threshold_warnings(self, slo: Slo, start: float, end: float) -> list[str]:
        return self.source.threshold_warnings(slo, start, end)


def scrape(rng: random.Random, target: str, end: float, *, burst: bool,
           bounds: tuple[float, ...] = TTFT_BOUNDS) -> Snapshot:
    requests = float(rng.randint(0, 40))
    counters = {series_key("gen_ai_server_requests_total",
                           {**MODEL, "finish_reason": "stop"}): requests,
                series_key("gen_ai_server_generation_tokens_total", MODEL): requests * 50}
    for error_type in ("timeout", "rejected", "bad_request"):
        bad = float(rng.randint(5, 20) if burst and error_type == "timeout"
                    else rng.random() < 0.05)
        counters[series_key("gen_ai_server_request_errors_total",
                            {**MODEL, "error_type": error_type})] = bad
    counts = [0.0] * (len(bounds) + 1)
    for _ in range(int(requests)):
        counts[min(int(rng.expovariate(0.5)), len(bounds))] += 1
    return Snapshot(target, end - 60, end, TargetState.UP, counters=counters, histograms={
        series_key(schema.TIME_TO_FIRST_TOKEN, MODEL): HistogramDelta(
            tuple(bounds), tuple(counts), 0.1 * requests, requests)})


def write_day(store: Store, end: float, *, other_layout: bool = False) -> None:
    """26 hours of one-minute scrapes of three targets: b down for 40 minutes, an error burst
    on a, c's TTFT in another bucket layout for an hour (when asked); then rolled up to two
    hours before ``end`` (hours, minutes and raw rows are all read)."""
    rng = random.Random(5)
    for name, pool in (("a", "p1"), ("b", "p1"), ("c", "p2")):
        store.register_target(TargetInfo(name, labels={"pool": pool}))
    snapshots = []
    for k in range(1, 26 * 60 + 1):
        t = end - 26 * HOUR + 60 * k
        for name in ("a", "b", "c"):
            if name == "b" and 600 <= k < 640:
                snapshots.append(down("b", t, duration=60))
                continue
            bounds = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5) if (
                other_layout and name == "c" and 900 <= k < 960) else TTFT_BOUNDS
            snapshots.append(scrape(rng, name, t, burst=name == "a" and 1200 <= k < 1230,
                                    bounds=bounds))
    store.write(snapshots)
    store.rollup(end - 2 * HOUR, lateness_seconds=0)


def slos() -> list[Slo]:
    specs: list[dict[str, Any]] = [
        {"sli": {"kind": "availability"}, "selector": {"target": "a"}},
        {"sli": {"kind": "availability", "errors": ["timeout"]}, "selector": {"target": "b"}},
        {"sli": {"kind": "availability"}, "selector": {"labels": {"pool": "p1"}},
         "window": "30d"},
        {"sli": {"kind": "latency", "metric": "ttft", "threshold_seconds": 0.2}},
        {"sli": {"kind": "latency", "metric": "ttft", "threshold_seconds": 1.0},
         "selector": {"labels": {"pool": "p2"}}},
        {"sli": {"kind": "latency", "metric": "ttft", "threshold_seconds": 0.5},
         "selector": {"target": "nowhere"}},
        {"sli": {"kind": "ratio", "total": {"metric": "gen_ai_server_requests"},
                 "bad": {"metric": "gen_ai_server_request_errors",
                         "labels": {"error_type": "timeout"}}},
         "selector": {"target": "a"}},
        {"sli": {"kind": "throughput", "min_per_second": 10}, "budgeting": "Timeslices",
         "timeslice_seconds": "5m", "selector": {"target": "b"}},
    ]
    return [Slo.model_validate({"name": f"slo-{k}", "objective": 0.99, "window": "1d",
                                **spec}) for k, spec in enumerate(specs)]


@pytest.mark.parametrize("other_layout", [False, True],
                         ids=["one bucket layout", "a layout change read per SLO"])
def test_read_many_gives_each_slo_the_steps_of_its_own_read(store: Store,
                                                             other_layout: bool) -> None:
    write_day(store, T0, other_layout=other_layout)
    source = StoreSliSource(store)
    for start, end, step in ((T0 - 24 * HOUR, T0 - 3 * HOUR, HOUR),  # hour rows
                             (T0 - 4 * HOUR, T0 - 90, 60),          # minutes, then raw
                             (T0 - 90, T0 - 17, 73)):               # an open minute
        many = source.read_many(slos(), start, end, step)
        for slo in slos():
            answer = many[slo.name]
            try:
                one: object = source.read(slo, start, end, step)
            except ValueError as exc:  # 0.2 s is not a bound the two layouts share
                one = repr(exc)
            assert (repr(answer) if isinstance(answer, Exception) else answer.steps()) == one


def test_a_bound_the_stored_layout_lacks_is_counted_at_the_edge_below_by_both_reads(
        store: Store) -> None:
    write_day(store, T0, other_layout=True)  # c stores 0.05 .. 2.5 for an hour: no 0.2 there
    slo = Slo.model_validate({"name": "x", "objective": 0.99, "window": "1d",
                              "selector": {"target": "c"},
                              "sli": {"kind": "latency", "metric": "ttft",
                                      "threshold_seconds": 0.2}})
    source = StoreSliSource(store)
    start, end = T0 - 12 * HOUR, T0 - 3 * HOUR
    answers = source.read_many([slo, *slos()[:1]], start, end, 60)
    x = answers["x"]
    assert not isinstance(x, Exception) and x.steps() == source.read(slo, start, end, 60)
    assert not isinstance(answers["slo-0"], Exception)
    (warning,) = source.threshold_warnings(slo, start, end)
    assert "target c" in warning and "nearest edges 0.1s and 0.25s" in warning


@pytest.mark.parametrize(("other_layout", "read_ahead"), [(False, 500), (True, 500), (False, 3)],
                         ids=["one bucket layout", "a layout change read per SLO",
                              "SLOs read ahead three at a time"])
def test_the_evaluator_reading_in_bulk_gives_the_statuses_of_reading_per_slo(
        store: Store, other_layout: bool, read_ahead: int,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evaluator, "READ_AHEAD_SLOS", read_ahead)
    write_day(store, T0, other_layout=other_layout)
    bulk = SloEvaluator(slos(), StoreSliSource(store))
    one_by_one = SloEvaluator(slos(), OneAtATime(store))
    for now in (T0 - 3 * HOUR + 7, T0 - 3 * HOUR + 22, T0 - 2 * HOUR + 45, T0 - 5):
        mine, theirs = bulk.tick(now), one_by_one.tick(now)
        # repr: NaN equals NaN there, and every field, burn rate and condition is compared
        assert repr(mine) == repr(theirs)
    assert {s.state.value for s in mine} >= {"ok", "burning"}
    assert np.isnan(mine[5].sli)  # the SLO without targets has no events


def test_a_report_read_in_columns_equals_the_report_read_step_by_step(store: Store) -> None:
    write_day(store, T0, other_layout=True)
    for slo in slos():
        built = []
        for source in (StoreSliSource(store), OneAtATime(store)):
            try:
                built.append(repr(build_report(slo, source, T0 - 20 * HOUR, T0, now=T0 - 30)))
            except ValueError as exc:  # 0.2 s is not a bound the two layouts share
                built.append(repr(exc))
        assert built[0] == built[1], slo.name
