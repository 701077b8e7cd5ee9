"""The canary-power bench's trial machinery: windows, block resamples, rates, re-judging."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from bench.canary_power import (
    Phase,
    block_bootstrap,
    evaluate,
    load_phases,
    p99_effect,
    real_windows,
    save_phases,
    wilson,
)
from monitor.canary.config import load_judge_config
from monitor.canary.samples import IntervalData


def _intervals(rng: np.random.Generator, n: int, scale: float) -> list[IntervalData]:
    out = []
    for _ in range(n):
        ttft = list(scale * rng.lognormal(math.log(0.05), 0.3, 16))
        tpot = list(scale * rng.lognormal(math.log(0.01), 0.1, 16))
        e2e = [a + 30 * b for a, b in zip(ttft, tpot)]
        itl = list(scale * rng.lognormal(math.log(0.01), 0.1, 64))
        values = {"ttft_p99": float(np.percentile(ttft, 99)),
                  "tpot_p99": float(np.percentile(tpot, 99)),
                  "e2e_p99": float(np.percentile(e2e, 99)),
                  "itl_p99": float(np.percentile(itl, 99)), "error_rate": 0.0,
                  "output_tokens_per_second": 160.0, "requests_per_second": 8.0}
        out.append(IntervalData({"ttft": ttft, "tpot": tpot, "e2e": e2e, "itl": itl}, values))
    return out


def test_windows_and_block_resamples() -> None:
    assert real_windows(130, 60) == [list(range(60)), list(range(60, 120))]
    picks = block_bootstrap(100, 60, 6, np.random.default_rng(0))
    assert len(picks) == 60 and all(0 <= i < 100 for i in picks)
    assert all(picks[k:k + 6] == list(range(picks[k], picks[k] + 6)) for k in range(0, 60, 6))
    low, high = wilson(0, 500)
    assert low == 0.0 and 0.005 < high < 0.01
    assert wilson(5, 10)[0] < 0.5 < wilson(5, 10)[1]


def test_evaluate_separates_a_twin_from_a_slowed_canary(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    config = load_judge_config(None)
    twin = Phase("aa", _intervals(rng, 120, 1.0), _intervals(rng, 120, 1.0))
    slowed = Phase("ab", _intervals(rng, 120, 1.0), _intervals(rng, 120, 1.15))
    aa = evaluate(twin, config, 60, 6, 30, seed=1)
    ab = evaluate(slowed, config, 60, 6, 30, seed=2)
    assert aa["real"]["trials"] == 2 and aa["bootstrap"]["trials"] == 30
    assert aa["bootstrap"]["fail_rate"] <= 0.1
    assert ab["bootstrap"]["fail_rate"] == 1.0 and ab["real"]["fail_rate"] == 1.0
    assert p99_effect(slowed) == pytest.approx(1.15, abs=0.08)
    save_phases(tmp_path / "phases.json", (twin, slowed), {"slowdown": 1.1, "calibration": []})
    (again_aa, again_ab), meta = load_phases(tmp_path / "phases.json")
    assert meta["slowdown"] == 1.1
    assert evaluate(again_ab, config, 60, 6, 30, seed=2) == ab


def test_bursty_stream_keeps_the_rate_and_shares_prefixes() -> None:
    import itertools

    from bench.canary_power import BurstyLoad, bursty_stream
    from monitor.loadgen.workload import LengthDist, WorkloadSpec

    workload = WorkloadSpec(input_len=LengthDist.parse("uniform:50-150"),
                            output_len=LengthDist.parse("fixed:32"), chars_per_token=1.0)
    load = BurstyLoad(depth=0.6, burst_seconds=5.0, prefix_share=0.7, prefix_tokens=64)
    requests = list(itertools.takewhile(lambda r: r.arrival_seconds < 1000,
                                        bursty_stream(workload, 8.0, load)))
    assert len(requests) / 1000 == pytest.approx(8.0, rel=0.1)
    # Bursts and lulls: counts per 2 s far more dispersed than Poisson's (variance = mean).
    counts = np.bincount([int(r.arrival_seconds // 2) for r in requests])
    assert counts.var() / counts.mean() > 2.0
    from collections import Counter
    heads = Counter(r.prompt[:64] for r in requests).most_common(4)
    prefixed = sum(count for _, count in heads)
    assert prefixed / len(requests) == pytest.approx(0.7, abs=0.05)
    assert BurstyLoad().plain and not load.plain


def test_simulated_servers_slow_down_and_share_nothing_but_the_load() -> None:
    from bench.canary_power import BurstyLoad, simulate_phase
    from monitor.loadgen.workload import LengthDist, WorkloadSpec

    workload = WorkloadSpec(input_len=LengthDist.parse("uniform:50-150"),
                            output_len=LengthDist.parse("fixed:8"), chars_per_token=1.0)
    load = BurstyLoad(depth=0.6, prefix_share=0.7)
    twin = simulate_phase("aa", workload, 8.0, 60.0, load, 1.0, 2.0, seed=1)
    slowed = simulate_phase("ab", workload, 8.0, 60.0, load, 1.3, 2.0, seed=1)
    assert len(twin.baseline) == len(twin.canary) >= 29
    sent = sum(len(d.per_request["ttft"]) for d in twin.baseline)
    assert sent == sum(len(d.per_request["ttft"]) for d in twin.canary) > 300
    assert twin.baseline[3].lengths["ttft"]      # the requests' lengths are kept
    assert twin.baseline[3].per_request["ttft"] != twin.canary[3].per_request["ttft"]
    assert p99_effect(slowed) > 1.15 and abs(p99_effect(twin) - 1.0) < 0.1
