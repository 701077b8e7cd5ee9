"""Canary comparisons end to end: identical live load on two servers, per-interval samples,
and two targets' stored data; the ``inferwatch canary`` command."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import numpy as np
import pytest

from exporters import schema
from monitor.canary.config import load_judge_config
from monitor.canary.judge import Outcome, Verdict
from monitor.canary.run import judge_runs, judge_stored, run_both
from monitor.canary.samples import combine, split_intervals
from monitor.cli import main
from monitor.loadgen.runner import Endpoint, Limits, RequestRecord
from monitor.loadgen.workload import LengthDist, RequestSpec, WorkloadSpec
from monitor.collect.snapshot import HistogramDelta, Snapshot, TargetState, series_key
from monitor.store import Store
from tests.monitor.loadgen.scripted_server import Script, scripted_server

WORKLOAD = WorkloadSpec(input_len=LengthDist("fixed", 8), output_len=LengthDist("fixed", 4),
                        chars_per_token=1.0, seed=3)


def _live(base_script: Script, canary_script: Script) -> tuple[Outcome, dict[str, Verdict]]:
    with scripted_server(base_script) as (a, _), scripted_server(canary_script) as (b, _):
        base, can = asyncio.run(run_both(Endpoint(a, "m"), Endpoint(b, "m"), WORKLOAD, 20.0,
                                         Limits(duration_seconds=4.0, warmup_seconds=0.5)))
    comparison = judge_runs(base, can, load_judge_config(None), interval_seconds=0.5)
    assert comparison.baseline_summary.requests == comparison.canary_summary.requests > 50
    return comparison.judgement.outcome, {r.name: r.verdict
                                          for r in comparison.judgement.results}


def test_a_slowed_canary_fails_and_its_twin_passes() -> None:
    outcome, verdicts = _live(Script(ttft=0.05, itl=0.02), Script(ttft=0.05, itl=0.02,
                                                                  slowdown=1.5))
    assert outcome is Outcome.FAIL
    assert verdicts["ttft"] is verdicts["itl"] is verdicts["e2e"] is Verdict.HIGH
    outcome, verdicts = _live(Script(ttft=0.05, itl=0.02), Script(ttft=0.05, itl=0.02))
    assert outcome is Outcome.PASS, verdicts


def _record(i: int, intended: float, ok: bool, ttft: float, tokens: int = 4) -> RequestRecord:
    r = RequestRecord(i, RequestSpec(intended, "p", tokens), intended_at=intended,
                      sent_at=intended, status=200 if ok else 500,
                      error_type=None if ok else "server_error", num_output_tokens=tokens)
    if ok:
        r.chunk_times = [intended + ttft + 0.01 * k for k in range(tokens)]
        r.finished_at = r.chunk_times[-1]
    else:
        r.finished_at = intended + 0.001
    return r


def test_interval_values() -> None:
    # Interval 0: 6 OK requests (TTFT 0.1..0.6); interval 1: 2 OK + 2 failed (< 5 OK: no p99).
    records = [_record(i, 0.1 * i, True, 0.1 * (i + 1)) for i in range(6)]
    records += [_record(6, 1.1, True, 0.05), _record(7, 1.2, True, 0.05),
                _record(8, 1.3, False, 0), _record(9, 1.4, False, 0)]
    intervals = split_intervals(records, 0.0, 1.0, min_requests=5)
    assert len(intervals) == 2
    first, second = intervals[0].values, intervals[1].values
    assert first["ttft_p99"] == pytest.approx(np.percentile([0.1 * k for k in range(1, 7)], 99))
    assert math.isnan(second["ttft_p99"])
    assert (first["error_rate"], second["error_rate"]) == (0.0, 0.5)
    assert (first["requests_per_second"], second["requests_per_second"]) == (5, 3)  # by finish
    assert first["output_tokens_per_second"] + second["output_tokens_per_second"] == 32
    samples = combine(intervals)
    assert len(samples["ttft"]) == 8 and samples["ttft_p99"] == [first["ttft_p99"]]
    assert samples["error_rate"] == [0.0, 0.5]


T0 = 1_800_000_000.0
BOUNDS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0)


def _minute(target: str, end: float, rng: np.random.Generator, slow: float) -> Snapshot:
    ttfts = rng.lognormal(math.log(0.08 * slow), 0.4, 300)
    counts = np.histogram(ttfts, bins=(0.0, *BOUNDS, math.inf))[0]
    model = {"model": "m"}
    return Snapshot(target, end - 60, end, TargetState.UP, counters={
        series_key(schema.get_spec(schema.REQUESTS).exposed_name,
                   {**model, "finish_reason": "stop"}): 300.0,
        series_key(schema.get_spec(schema.GENERATION_TOKENS).exposed_name, model):
            300.0 * 100 / slow,
    }, histograms={series_key(schema.TIME_TO_FIRST_TOKEN, model): HistogramDelta(
        BOUNDS, tuple(float(c) for c in counts), float(ttfts.sum()), 300.0)})


def _history(store: Store, slow: float) -> None:
    rng = np.random.default_rng(5)
    store.write([_minute(name, T0 + 60 * k, rng, factor)
                 for k in range(1, 61) for name, factor in (("old", 1.0), ("new", slow),
                                                            ("twin", 1.0))])


def test_stored_comparison_judges_two_targets_over_a_range(store: Store) -> None:
    _history(store, slow=2.5)
    config = load_judge_config(None)
    bad = judge_stored(store, "old", "new", T0, T0 + 3600, 60, config)
    verdicts = {r.name: r for r in bad.judgement.results}
    assert bad.judgement.outcome is Outcome.FAIL
    assert verdicts["ttft_p99"].verdict is Verdict.HIGH and verdicts["ttft_p99"].n_canary == 60
    assert verdicts["output_tokens_per_second"].verdict is Verdict.LOW
    assert verdicts["ttft"].verdict is Verdict.NODATA        # no per-request data in a store
    twin = judge_stored(store, "old", "twin", T0, T0 + 3600, 60, config)
    assert twin.judgement.outcome is Outcome.PASS
    with pytest.raises(ValueError, match="target 'nope' is not in the store"):
        judge_stored(store, "old", "nope", T0, T0 + 3600, 60, config)


def test_canary_command_on_stored_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from monitor.store import open_store

    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_store(url)
    store.migrate()
    _history(store, slow=2.5)
    store.close()
    args = ["canary", "stored", "--store", url, "--baseline-target", "old", "--start",
            str(T0), "--end", "2027-01-15T09:00:00Z", "--output-dir", str(tmp_path / "out")]
    assert main([*args, "--canary-target", "new"]) == 1
    assert "canary FAIL" in capsys.readouterr().out
    judgement = json.loads((tmp_path / "out" / "judgement.json").read_text())
    assert judgement["judgement"]["outcome"] == "fail"
    assert main([*args, "--canary-target", "twin", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["outcome"] == "pass"
    assert main([*args, "--canary-target", "ghost"]) == 2
    assert "target 'ghost' is not in the store" in capsys.readouterr().err
    from monitor.store.runs import list_runs
    store = open_store(url)
    runs = list_runs(store.engine, "canary")
    store.close()
    assert [r.status for r in runs] == ["done", "done"]
    assert {r.result["judgement"]["outcome"] for r in runs if r.result} == {"fail", "pass"}
