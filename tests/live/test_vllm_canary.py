"""`inferwatch canary live` on real vLLM servers (0.32, CPU build, the tiny model; issue 21):
two engines of the same configuration pass (A/A), and a configuration that queues under the
same load (`--max-num-seqs 1`) fails on its p99 TTFT, a slowdown the load generator's own
records and vLLM's own queue-time histogram confirm.

Both held only once vLLM's CPU Worker process was gone (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, in
tests/live/vllm_server.py): it busy-polls for 1 s after every step, so two loaded engines on
2 cores starved each other at random and an A/A's side came out 2-6x slower than its twin."""

from __future__ import annotations

import json
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
from tests.cpu_lock import cpu_lock

# The module's engines start (concurrently) before the first test: up to START_TIMEOUT_SECONDS.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.live_engine,
              pytest.mark.timeout(START_TIMEOUT_SECONDS + 300)]

# 4 req/s of 32 prompt and 64 output tokens (EOS ignored) for 30 s, judged in 3-s intervals
# (10 clusters of about 12 requests, enough per-interval p99s for a 95% interval). A default
# engine batches that far below its capacity (TTFT ~12 ms); one sequence at a time (~6 req/s at
# most) is busy two thirds of the time, so requests queue behind each other: p99 TTFT ~10x.
# On this 2-core machine 6 of 6 A/As passed and 6 of 6 slow canaries failed at 3 and 4 req/s
# (`python -m bench.live_canary`, docs/benchmarks.md).
LOAD = ("--model", "tiny", "--rate", "4", "--duration", "30", "--interval", "3",
        "--warmup", "2", "--input-len", "fixed:32", "--output-len", "fixed:64", "--quiet")


@dataclass(frozen=True)
class Engines:
    baseline: RunningVllm   # default flags
    twin: RunningVllm       # the same flags
    slow: RunningVllm       # --max-num-seqs 1


@pytest.fixture(scope="module", autouse=True)
def _alone_on_the_cpu() -> Iterator[None]:
    """Two engines compared side by side: no `waits` test runs beside them (tests/cpu_lock.py),
    taken before the engines start (autouse fixtures come first in their scope)."""
    with cpu_lock(exclusive=True):
        yield


@pytest.fixture(scope="module")
def engines() -> Iterator[Engines]:
    # Engines of their own, eager as the session's engine (torch.compile's warm-up would cost
    # ~40 s each), all three started at once: one start's wall time.
    with ExitStack() as stack:
        with ThreadPoolExecutor(3) as pool:
            baseline = pool.submit(stack.enter_context, running_vllm())
            twin = pool.submit(stack.enter_context, running_vllm())
            slow = pool.submit(stack.enter_context, running_vllm("--max-num-seqs", "1"))
        yield Engines(baseline.result(), twin.result(), slow.result())


def canary_live(baseline: RunningVllm, canary: RunningVllm, out: Path) -> tuple[int, Any]:
    code = main(["canary", "live", "--baseline-url", baseline.url, "--canary-url", canary.url,
                 *LOAD, "--output-dir", str(out)])
    return code, json.loads((out / "judgement.json").read_text())


def verdicts(document: Any) -> dict[str, str]:
    return {m["name"]: m["verdict"] for m in document["judgement"]["results"]}


def client_ttft_mean(path: Path) -> float:
    """The mean TTFT of the measured requests, from the load generator's own records."""
    records = [json.loads(line) for line in path.read_text().splitlines()]
    measured = [r for r in records if not r["warmup"]]
    assert measured and all(r["status"] == 200 for r in measured)
    return float(statistics.fmean(r["ttft"] for r in measured))


def queue_seconds(server: RunningVllm) -> tuple[float, float]:
    """vLLM's own request queue time so far: (sum of seconds, count of requests)."""
    page = parse_page(httpx.get(server.metrics_url, timeout=10).text, server.url)
    found = {s.name: s.value for f in page.families.values() for s in f.samples
             if s.name.startswith("vllm:request_queue_time_seconds_")}
    return found["vllm:request_queue_time_seconds_sum"], found[
        "vllm:request_queue_time_seconds_count"]


def test_a_a_two_engines_of_the_same_configuration_pass(engines: Engines,
                                                        tmp_path: Path) -> None:
    code, document = canary_live(engines.baseline, engines.twin, tmp_path / "first")
    if (code, document["judgement"]["outcome"]) != (0, "pass"):
        # A false alarm on one of the eleven metrics (each judged at 95%) happens to an A/A
        # now and then: one CI run of 2026-11-28 came out marginal on e2e_p99 alone (1.23x,
        # interval [1.06, 1.35]) where the same test alone passed. A judge that fails an A/A
        # for a reason would fail it again: the second run must pass.
        print(f"first A/A run: {document['judgement']['outcome']}, "
              f"{document['judgement']['score']}; judged again")
        code, document = canary_live(engines.baseline, engines.twin, tmp_path / "second")
    judged = document["judgement"]
    assert (code, judged["outcome"]) == (0, "pass"), json.dumps(judged, indent=1)
    results = {m["name"]: m for m in judged["results"]}
    # Judged on real data, not waved through: every request answered on both sides, and the
    # per-interval p99s had intervals enough for a 95% interval.
    assert results["ttft"]["n_baseline"] == results["ttft"]["n_canary"] >= 30
    assert results["error_rate"]["median_canary"] == 0.0
    assert results["ttft_p99"]["n_baseline"] >= 4 and results["ttft_p99"]["n_canary"] >= 4


def test_a_configuration_that_queues_fails(engines: Engines, tmp_path: Path) -> None:
    before = {side: queue_seconds(getattr(engines, side)) for side in ("baseline", "slow")}
    code, document = canary_live(engines.baseline, engines.slow, tmp_path)
    after = {side: queue_seconds(getattr(engines, side)) for side in ("baseline", "slow")}
    judged = document["judgement"]
    assert (code, judged["outcome"]) == (1, "fail"), json.dumps(judged, indent=1)
    worse = {name for name, verdict in verdicts(document).items() if verdict == "high"}
    # The queue shows in the per-interval p99 TTFT, critical: the run fails on it alone. What
    # else is flagged (per-request TTFT, E2E) is a latency that includes the wait.
    assert judged["critical_failures"] == ["ttft_p99"]
    assert "ttft_p99" in worse and worse <= {"ttft", "ttft_p99", "e2e", "e2e_p99"}, worse
    # The slowdown is real, not the judge's luck: the load generator's own mean TTFT (the
    # median moves less: a third of the requests find the one sequence free)...
    base_ttft = client_ttft_mean(tmp_path / "baseline.jsonl")
    slow_ttft = client_ttft_mean(tmp_path / "canary.jsonl")
    assert slow_ttft > 3 * base_ttft, (slow_ttft, base_ttft)
    # ...and the engine's own: the requests waited in the slow one's queue.
    mean_queue = {side: (after[side][0] - before[side][0]) / (after[side][1] - before[side][1])
                  for side in before}
    assert mean_queue["slow"] > 0.02 and mean_queue["slow"] > 5 * mean_queue["baseline"], \
        mean_queue
