"""A latency SLO whose threshold is not an edge of a target's stored buckets (vLLM 0.32's TTFT
has no 2.0 s edge) is evaluated at the edge below, and its status says so (issue 21)."""

from __future__ import annotations

import logging

import pytest

from exporters import schema
from monitor.api.convert import slo_out
from monitor.collect.snapshot import HistogramDelta, Snapshot, TargetState, series_key
from monitor.slo.evaluator import SloEvaluator, SloState
from monitor.slo.report import build_report
from monitor.slo.report_html import render_html
from monitor.slo.source import StoreSliSource
from monitor.slo.spec import Slo
from monitor.store import Store, TargetInfo
from tests.exporters.vllm_edges import vllm_edges

T0 = 1_800_000_000.0
REQUESTS = series_key("gen_ai_server_requests_total", {"model": "tiny", "finish_reason": "stop"})
TTFT = series_key(schema.TIME_TO_FIRST_TOKEN, {"model": "tiny"})


def vllm_scrape(end: float) -> Snapshot:
    """A minute of a vLLM target: 90 first tokens within 1 s, 8 in (1, 2.5], 2 above 2.5 s."""
    edges = vllm_edges("vllm:time_to_first_token_seconds")
    counts = [0.0] * (len(edges) + 1)
    counts[edges.index(1.0)], counts[edges.index(2.5)], counts[edges.index(5.0)] = 90, 8, 2
    return Snapshot("vllm-0", end - 60, end, TargetState.UP, counters={REQUESTS: 100.0},
                    histograms={TTFT: HistogramDelta(edges, tuple(counts), 0.0, 100.0)})


def ttft_slo(threshold: float) -> Slo:
    return Slo.model_validate({"name": "chat-ttft", "objective": 0.9, "window": "1d",
                               "sli": {"kind": "latency", "metric": "ttft",
                                       "threshold_seconds": threshold}})


@pytest.fixture
def vllm_store(store: Store) -> Store:
    store.register_target(TargetInfo("vllm-0", engine="vllm", labels={"model": "tiny"}))
    store.write([vllm_scrape(T0 + 60 * k) for k in range(1, 31)])
    return store


def test_a_2s_ttft_threshold_on_vllms_edges_warns_with_the_sli_bounds(
        vllm_store: Store, caplog: pytest.LogCaptureFixture) -> None:
    evaluator = SloEvaluator([ttft_slo(2.0)], StoreSliSource(vllm_store), settle_seconds=0)
    with caplog.at_level(logging.WARNING, logger="monitor.slo.evaluator"):
        status = evaluator.tick(T0 + 1800)[0]
        evaluator.tick(T0 + 1860)
    assert status.state is not SloState.ERROR
    assert status.sli == pytest.approx(0.9)  # good counted at 1.0 s: a lower bound
    (warning,) = status.warnings
    assert "target vllm-0" in warning and "threshold 2s" in warning
    assert "nearest edges 1s and 2.5s" in warning
    assert "between 90.0000% (at 1s) and 98.0000% (at 2.5s)" in warning
    assert [r.getMessage() for r in caplog.records].count(warning) == 1  # logged once
    assert slo_out(ttft_slo(2.0), status, []).model_dump(mode="json")["warnings"] == [warning]


def test_a_threshold_on_an_edge_has_no_warning(vllm_store: Store) -> None:
    evaluator = SloEvaluator([ttft_slo(1.0)], StoreSliSource(vllm_store), settle_seconds=0)
    status = evaluator.tick(T0 + 1800)[0]
    assert status.warnings == () and status.sli == pytest.approx(0.9)
    assert slo_out(ttft_slo(1.0), status, []).warnings == []


def test_the_report_says_the_sli_is_a_bound(vllm_store: Store) -> None:
    report = build_report(ttft_slo(2.0), StoreSliSource(vllm_store), T0, T0 + 1800, 60,
                           now=T0 + 1900)
    (warning,) = report.warnings
    assert "nearest edges 1s and 2.5s" in warning
    assert report.to_dict()["warnings"] == [warning]
    assert 'id="warnings"' in render_html(report)
    on_edge = build_report(ttft_slo(1.0), StoreSliSource(vllm_store), T0, T0 + 1800, 60,
                           now=T0 + 1900)
    assert on_edge.warnings == () and 'id="warnings"' not in render_html(on_edge)


def test_a_monitor_started_before_the_first_requests_warns_once_they_are_stored(
        store: Store) -> None:
    """The first tick finds no buckets stored (the engine has served nothing yet); the tick
    after the first requests reads them again instead of waiting an hour (issue 21: found on
    `inferwatch serve` started in front of a fresh vLLM)."""
    store.register_target(TargetInfo("vllm-0", engine="vllm", labels={"model": "tiny"}))
    evaluator = SloEvaluator([ttft_slo(2.0)], StoreSliSource(store), settle_seconds=0)
    assert evaluator.tick(T0)[0].warnings == ()
    store.write([vllm_scrape(T0 + 60)])
    (warning,) = evaluator.tick(T0 + 61)[0].warnings
    assert "nearest edges 1s and 2.5s" in warning
