"""Bench runs for the run pages, made by the real code on simulated requests and recorded as
the service records them (monitor/store/runs.py): a sweep, a live canary, a stored canary run
through the API, and a running and a failed run of each kind.

The requests come from a simulated server: one queue serving 12 requests/s, Poisson arrivals,
20 output tokens each. Its requests are summarised (loadgen.metrics.summarize), each sweep step
is judged (sweep.judge_step: the 16 req/s step's backlog grows) and the capacity, bracket and
knee are found as ``sweep()`` finds them; the canary's two runs are judged by judge_runs with
the packaged judge configuration.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from monitor.canary.config import load_judge_config
from monitor.canary.run import judge_runs
from monitor.loadgen.metrics import LatencySlo, summarize
from monitor.loadgen.runner import RequestRecord, RunResult
from monitor.loadgen.sweep import (
    SweepOptions,
    SweepResult,
    interpolate_capacity,
    judge_step,
    knee,
    slo_bracket,
)
from monitor.loadgen.workload import RequestSpec
from monitor.store.runs import finish_run, start_run
from tests.monitor.api.conftest import Api, served_api
from tests.monitor.client.conftest import start_stored_canary

SERVICE_RATE = 12.0          # requests/s the simulated server serves
STEP_SECONDS = 30.0
OUTPUT_TOKENS = 20
SWEEP_RATES = (1.0, 2.0, 4.0, 8.0, 16.0, 12.0)   # the last as a refinement midpoint
SWEEP_CONFIG = {"name": "nightly", "url": "http://127.0.0.1:8000", "model": "tiny",
                "workload": {"input_len": "fixed:100", "output_len": "fixed:20"},
                "slo": {"ttft_ms": 200, "tpot_ms": 50, "e2e_ms": None},
                "attainment": 0.9, "step_seconds": STEP_SECONDS}


def simulated_run(rate: float, *, seconds: float = STEP_SECONDS, prefill: float = 0.04,
                  tpot: float = 0.015, seed: int = 0) -> RunResult:
    """Requests at ``rate`` (Poisson) to a server that starts one every 1/SERVICE_RATE s."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / rate, int(rate * seconds * 1.5)))
    records, free_at = [], 0.0
    for k, sent in enumerate(float(a) for a in arrivals if a < seconds):
        start = max(sent, free_at)
        free_at = start + 1 / SERVICE_RATE
        first = start + prefill * float(rng.lognormal(0, 0.25))
        step = tpot * float(rng.lognormal(0, 0.1))
        chunks = [first + j * step for j in range(OUTPUT_TOKENS)]
        records.append(RequestRecord(
            index=k, spec=RequestSpec(sent, "hello", OUTPUT_TOKENS), intended_at=sent,
            sent_at=sent, chunk_times=chunks, finished_at=chunks[-1], status=200,
            prompt_tokens=100, num_output_tokens=OUTPUT_TOKENS, usage_reported=True))
    return RunResult(records, wall_start=0.0, measure_start=0.0, rate=rate,
                     max_concurrency=None)


def sweep_result() -> SweepResult:
    """The steps as ``sweep()`` runs them, up to the first saturated one plus a midpoint."""
    options = SweepOptions(slo=LatencySlo(ttft=0.2, tpot=0.05), attainment_target=0.9,
                           step_seconds=STEP_SECONDS)
    result = SweepResult(options)
    for k, rate in enumerate(SWEEP_RATES):
        run = simulated_run(rate, seed=k)
        point = judge_step(run, summarize(run, options.percentiles, options.slo), options,
                           rate)
        result.points.append(point)
        if point.saturated and result.saturation_rate is None:
            result.saturation_rate = rate
    low, high = slo_bracket(result.points, options.attainment_target)
    assert low is not None and high is not None, "the simulated server crosses the SLO"
    result.bracket = (low.rate, high.rate)
    result.max_rate_under_slo = interpolate_capacity(low, high, options.attainment_target)
    result.knee = knee(result.sorted_points(), options.knee_metric)
    return result


def live_canary_document() -> dict[str, object]:
    """A canary whose prefill is 40% slower than the baseline's, judged at 4 req/s."""
    base = simulated_run(4.0, seconds=120.0, seed=1)
    can = simulated_run(4.0, seconds=120.0, prefill=0.056, seed=2)
    return judge_runs(base, can, load_judge_config(), interval_seconds=10.0).to_json()


LIVE_CONFIG = {"mode": "live", "name": "slow-prefill", "baseline_url": "http://10.0.0.1:8000",
               "canary_url": "http://10.0.0.2:8000", "model": "tiny", "rate": 4.0,
               "duration_seconds": 120.0, "interval_seconds": 10.0}


@dataclass
class RunsApi:
    api: Api
    sweep: str
    sweep_running: str
    sweep_failed: str
    live_canary: str
    stored_canary: str
    canary_running: str
    canary_failed: str


@contextmanager
def served_runs(tmp_path: Path) -> Iterator[RunsApi]:
    with served_api(tmp_path) as api:
        engine = api.state.store.engine
        sweep = start_run(engine, "sweep", "nightly", SWEEP_CONFIG)
        finish_run(engine, sweep, sweep_result().to_json())
        sweep_running = start_run(engine, "sweep", "in-flight", SWEEP_CONFIG)
        sweep_failed = start_run(engine, "sweep", "refused", SWEEP_CONFIG)
        finish_run(engine, sweep_failed, None, error="ConnectError: connection refused")
        live = start_run(engine, "canary", "slow-prefill", LIVE_CONFIG)
        finish_run(engine, live, live_canary_document())
        canary_running = start_run(engine, "canary", "in-flight", LIVE_CONFIG)
        canary_failed = start_run(engine, "canary", "unreachable", LIVE_CONFIG)
        finish_run(engine, canary_failed, None,
                   error="EndpointError: http://10.0.0.2:8000 answered 503")
        yield RunsApi(api, sweep, sweep_running, sweep_failed, live,
                      start_stored_canary(api), canary_running, canary_failed)
