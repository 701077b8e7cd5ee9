"""The bounds an off-edge warning states hold the SLI reported beside it (issue 30: "the true
SLI is between 100.0000% and 100.0000%" beside an SLI of 33.956%): on vLLM's TTFT layout,
whose edges 0.1 s and 0.25 s lie around a 200 ms threshold, on the first tick with events and
after more events arrive, for one target and for an SLO over a vLLM target and a target whose
buckets hold the threshold."""

from __future__ import annotations

import re

import pytest

from exporters import schema
from monitor.collect.snapshot import HistogramDelta, Snapshot, TargetState, series_key
from monitor.slo.evaluator import SloEvaluator, SloStatus
from monitor.slo.source import StoreSliSource
from monitor.slo.spec import Slo
from monitor.store import Store, TargetInfo
from tests.exporters.vllm_edges import vllm_edges

T0 = 1_800_000_000.0
REQUESTS = series_key("gen_ai_server_requests_total", {"model": "tiny", "finish_reason": "stop"})
TTFT = series_key(schema.TIME_TO_FIRST_TOKEN, {"model": "tiny"})
VLLM = vllm_edges("vllm:time_to_first_token_seconds")
SCHEMA = tuple(schema.get_spec(schema.TIME_TO_FIRST_TOKEN).buckets)   # 0.2 is an edge
SLO = Slo.model_validate({"name": "chat-ttft", "objective": 0.99, "window": "30d",
                          "sli": {"kind": "latency", "metric": "ttft",
                                  "threshold_seconds": 0.2}})


def scrape(target: str, end: float, edges: tuple[float, ...], *, fast: float = 0.0,
           between: float = 0.0, slow: float = 0.0) -> Snapshot:
    """15 s of a target: first tokens within 0.1 s, in (0.2, 0.25] (good, but past vLLM's
    edge below), and at 0.5 s."""
    counts = [0.0] * (len(edges) + 1)
    counts[edges.index(0.1)] += fast
    counts[edges.index(0.25)] += between
    counts[edges.index(0.5)] += slow
    events = fast + between + slow
    return Snapshot(target, end - 15, end, TargetState.UP, counters={REQUESTS: events},
                    histograms={TTFT: HistogramDelta(edges, tuple(counts), 0.0, events)})


def stated_bounds(status: SloStatus) -> tuple[float, float]:
    (warning,) = status.warnings
    found = re.search(r"the true SLI is between ([\d.]+)%.*? and ([\d.]+)%", warning)
    assert found, warning
    return float(found.group(1)) / 100, float(found.group(2)) / 100


def holds(status: SloStatus) -> bool:
    lower, upper = stated_bounds(status)
    return lower - 5e-7 <= status.sli <= upper + 5e-7  # the message rounds to 0.0001%


@pytest.fixture
def vllm(store: Store) -> Store:
    store.register_target(TargetInfo("vllm-0", engine="vllm", labels={"model": "tiny"}))
    return store


def test_one_vllm_target_warm_then_slow(vllm: Store) -> None:
    """Warm-up requests all within 0.1 s (the bounds read 100% and 100%), then load of which
    34 in 100 come within 0.1 s and 20 more within 0.25 s: the SLI counted at 0.1 s falls to
    about 34%, and the bounds read again with the events (34% to 54%) hold it."""
    evaluator = SloEvaluator([SLO], StoreSliSource(vllm), settle_seconds=0)
    vllm.write([scrape("vllm-0", T0 + 15, VLLM, fast=3)])
    first = evaluator.tick(T0 + 16)[0]
    assert stated_bounds(first) == (1.0, 1.0) and holds(first)
    vllm.write([scrape("vllm-0", T0 + 15 * k, VLLM, fast=34, between=20, slow=46)
                for k in range(2, 42)])
    loaded = evaluator.tick(T0 + 15 * 41 + 1)[0]
    assert loaded.sli == pytest.approx((3 + 40 * 34) / (3 + 40 * 100))
    assert holds(loaded)
    assert stated_bounds(loaded)[1] == pytest.approx((3 + 40 * 54) / (3 + 40 * 100), abs=1e-6)


def test_a_vllm_target_beside_a_target_with_the_edge_states_the_slos_bounds(
        vllm: Store) -> None:
    """vLLM answers fast, the other target (schema buckets, 0.2 s an edge: counted exactly)
    slowly: the SLO's SLI is 1/3 with 1/3 more to be had at vLLM's 0.25 s edge, not vLLM's
    own 100%..100%, which the warning says apart."""
    vllm.register_target(TargetInfo("ref-0", labels={"model": "tiny"}))
    evaluator = SloEvaluator([SLO], StoreSliSource(vllm), settle_seconds=0)
    vllm.write([scrape("vllm-0", T0 + 15, VLLM, fast=5),
                scrape("ref-0", T0 + 15, SCHEMA, slow=10)])
    first = evaluator.tick(T0 + 16)[0]
    assert first.sli == pytest.approx(1 / 3) and holds(first)
    (warning,) = first.warnings
    assert "target vllm-0" in warning and "from its 2 targets" in warning
    assert "(vllm-0: 100.0000% at 0.1s to 100.0000% at 0.25s of its 5)" in warning
    vllm.write([scrape("vllm-0", T0 + 15 * k, VLLM, between=10) for k in range(2, 6)]
               + [scrape("ref-0", T0 + 15 * k, SCHEMA, fast=10) for k in range(2, 6)])
    later = evaluator.tick(T0 + 15 * 5 + 1)[0]
    assert later.sli == pytest.approx(45 / 95) and holds(later)
    assert stated_bounds(later) == (pytest.approx(45 / 95, abs=1e-6),
                                    pytest.approx(85 / 95, abs=1e-6))
