"""bench/goodput_sources.py: the histogram estimate read as worked out by hand, and a short
real run (processes, store, load generator) where events and client count the same."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest

from bench.goodput_sources import bucketed, fraction_at_most, main, workload

INF = math.inf


@pytest.mark.parametrize(("threshold", "expected"), [
    (0.1, 0.2),   # on an edge: 2 of 10
    (0.3, 0.6),   # halfway through (0.2, 0.4], which holds 4: 4 + 2 = 6 of 10
    (0.5, 0.8),   # past the last finite edge: only the edge's count (8), no interpolation
], ids=["on-an-edge", "interpolated", "in-the-inf-bucket"])
def test_the_fraction_met_read_from_cumulative_buckets(threshold: float, expected: float) -> None:
    bounds, cumulative = [0.1, 0.2, 0.4, INF], [2.0, 4.0, 8.0, 10.0]
    assert fraction_at_most(bounds, cumulative, threshold) == pytest.approx(expected)


def test_bucketed_counts_values_at_most_each_edge() -> None:
    assert bucketed([0.05, 0.1, 0.3, 9.0], [0.1, 0.2]) == ([0.1, 0.2, INF], [2.0, 2.0, 4.0])


def test_the_workload_is_seeded_and_clear_of_the_targets() -> None:
    args = argparse.Namespace(requests=300, rate=20.0, ttft_ms=370.0, tpot_ms=60.0,
                              margin_ms=50.0, tpot_margin_ms=10.0, slowdown_sigma=0.4,
                              fail_fraction=0.03, seed=1)
    specs = workload(args)
    assert specs == workload(args)
    ttfts = [float(s.prompt.split()[0].split("=")[1]) for s in specs]
    assert all(abs(t - 0.37) > 0.05 for t in ttfts)
    assert 0 < sum(t > 0.37 for t in ttfts) < len(ttfts)  # some miss, most do not


def test_a_short_run_counts_the_same_good_requests_from_events_and_client(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A wide margin: on this shared 2-core machine the client can see a first token hundreds
    # of ms after the gateway did (its own scheduling, the gateway's accept backlog).
    out = tmp_path / "goodput.json"
    # Requests 200 ms apart on average, so a stalled client still pairs with its own event.
    assert main(["--requests", "30", "--rate", "5", "--ttft-ms", "600", "--margin-ms", "400",
                 "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "events stored 30" in printed and "histogram estimate, gateway buckets" in printed
    result = json.loads(out.read_text())
    assert result["events_good_verdict"] == result["gateway_good_counter"]
    assert 0 < result["events_good_verdict"] < result["requests"]
    # Every request paired; any verdict that differs has a target between the client's and
    # the gateway's timing (main returns 1 otherwise), and accounts for the counts' gap.
    assert result["paired"] == 30
    assert abs(result["client_good"] - result["events_good_verdict"]) \
        <= len(result["disagreements"])
