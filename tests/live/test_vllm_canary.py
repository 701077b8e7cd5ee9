"""`inferwatch canary live` on real vLLM servers (0.32, CPU build, the tiny model; issue 21):
two engines of the same configuration pass (A/A).

A slower configuration failing (`--max-num-seqs 1` under a load that makes it queue) was
tried and is not here: at loads near the default engine's capacity on this 2-core machine
(one OpenMP thread each), which engine of a pair is slower changed from run to run (a large
batch's steps cost more than one sequence's), so neither the A/A nor the slow verdict held in
CI. The fail path is proven on the reference server (tests/monitor/canary)."""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from exporters.exposition import parse_page
from monitor.cli import main
from tests.live.vllm_server import START_TIMEOUT_SECONDS, RunningVllm, running_vllm

# The module's engines start (concurrently) before the first test: up to START_TIMEOUT_SECONDS.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.live_engine,
              pytest.mark.timeout(START_TIMEOUT_SECONDS + 300),
              # Opt-in until it is understood: in 4 of 8 runs on this 2-core machine (CI
              # included) the A/A's canary side came out 2-6x slower than its identical baseline,
              # eager or compiled, so the suite cannot rely on it (docs/benchmarks.md).
              pytest.mark.skipif(os.environ.get("INFERWATCH_LIVE_CANARY") != "1",
                                 reason="the live vLLM canary is opt-in "
                                        "(INFERWATCH_LIVE_CANARY=1): its A/A is not reliable "
                                        "on 2 cores yet, see docs/benchmarks.md")]

# 2 req/s of 32 prompt and 64 output tokens (EOS ignored) for 30 s, judged in 3-s intervals:
# well below an engine's capacity, 10 clusters of about 6 requests, so that one engine
# stalling for several seconds on this busy machine (seen: 5 s of 16) is one cluster or two,
# not a run's worth of evidence, and the per-interval p99s have enough intervals for a 95%
# interval.
LOAD = ("--model", "tiny", "--rate", "2", "--duration", "30", "--interval", "3",
        "--warmup", "2", "--input-len", "fixed:32", "--output-len", "fixed:64", "--quiet")


@dataclass(frozen=True)
class Engines:
    baseline: RunningVllm   # default flags
    twin: RunningVllm       # the same flags


@pytest.fixture(scope="module")
def engines() -> Iterator[Engines]:
    # Two eager engines of their own, as the session's engine runs: two compiled ones started
    # together came up unequal (one 2.5-6x slower per token, in CI and here: a race in the
    # compilation), which no A/A can pass.
    with ExitStack() as stack:
        with ThreadPoolExecutor(2) as pool:  # both start at once: one start's wall time
            baseline = pool.submit(stack.enter_context, running_vllm())
            twin = pool.submit(stack.enter_context, running_vllm())
        yield Engines(baseline.result(), twin.result())


def canary_live(baseline: RunningVllm, canary: RunningVllm, out: Path) -> tuple[int, Any]:
    code = main(["canary", "live", "--baseline-url", baseline.url, "--canary-url", canary.url,
                 *LOAD, "--output-dir", str(out)])
    return code, json.loads((out / "judgement.json").read_text())


def verdicts(document: Any) -> dict[str, str]:
    return {m["name"]: m["verdict"] for m in document["judgement"]["results"]}


def client_ttft_median(path: Path) -> float:
    """The median TTFT of the measured requests, from the load generator's own records."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    measured = [r for r in records if not r["warmup"]]
    assert measured and all(r["status"] == 200 for r in measured)
    return float(statistics.median(r["ttft"] for r in measured))


def queue_seconds(server: RunningVllm) -> tuple[float, float]:
    """vLLM's own request queue time so far: (sum of seconds, count of requests)."""
    page = parse_page(httpx.get(server.metrics_url, timeout=10).text, server.url)
    found = {s.name: s.value for f in page.families.values() for s in f.samples
             if s.name.startswith("vllm:request_queue_time_seconds_")}
    return found["vllm:request_queue_time_seconds_sum"], found[
        "vllm:request_queue_time_seconds_count"]


def test_a_a_two_engines_of_the_same_configuration_pass(engines: Engines,
                                                        tmp_path: Path) -> None:
    code, document = canary_live(engines.baseline, engines.twin, tmp_path)
    judged = document["judgement"]
    assert (code, judged["outcome"]) == (0, "pass"), json.dumps(judged, indent=1)
    results = {m["name"]: m for m in judged["results"]}
    # Judged on real data, not waved through: every request answered on both sides, and the
    # per-interval p99s had intervals enough for a 95% interval.
    assert results["ttft"]["n_baseline"] == results["ttft"]["n_canary"] >= 30
    assert results["error_rate"]["median_canary"] == 0.0
    assert results["ttft_p99"]["n_baseline"] >= 4 and results["ttft_p99"]["n_canary"] >= 4
