"""Shared benchmark workload: Poisson arrivals, lognormal prompt and output lengths, and a
driver that feeds an in-process LLMEngine in wall-clock time."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from reference_server.engine import LLMEngine
from reference_server.sampling import SamplingParams

BOS = 256


@dataclass(frozen=True, slots=True)
class BenchRequest:
    request_id: str
    arrival_seconds: float
    prompt_token_ids: list[int]
    max_tokens: int


def lognormal_lengths(rng: np.random.Generator, n: int, mean: float, sigma: float,
                      low: int, high: int) -> np.ndarray:
    mu = math.log(mean) - sigma**2 / 2   # so that the distribution's mean is `mean`
    return np.clip(rng.lognormal(mu, sigma, n), low, high).astype(int)


def make_workload(num_requests: int, rate: float, seed: int = 0, prompt_mean: float = 256,
                  output_mean: float = 128, sigma: float = 1.0, max_prompt: int = 1024,
                  max_output: int = 1024) -> list[BenchRequest]:
    """rate <= 0 means every request arrives at t=0 (offline throughput)."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate, num_requests) if rate > 0 else np.zeros(num_requests)
    arrivals = np.cumsum(gaps) - gaps[0]
    prompts = lognormal_lengths(rng, num_requests, prompt_mean, sigma, 4, max_prompt)
    outputs = lognormal_lengths(rng, num_requests, output_mean, sigma, 1, max_output)
    return [BenchRequest(f"req-{i}", float(arrivals[i]),
                         [BOS, *rng.integers(0, 256, prompts[i] - 1).tolist()], int(outputs[i]))
            for i in range(num_requests)]


@dataclass(slots=True)
class RunResult:
    wall_seconds: float = 0.0
    num_output_tokens: int = 0
    e2e: list[float] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    num_steps: int = 0
    sum_batch_size: int = 0

    @property
    def output_tokens_per_second(self) -> float:
        return self.num_output_tokens / self.wall_seconds

    @property
    def mean_batch_size(self) -> float:
        return self.sum_batch_size / max(1, self.num_steps)

    def percentile(self, which: str, q: float) -> float:
        return float(np.percentile(getattr(self, which), q))


def drive(engine: LLMEngine, workload: Sequence[BenchRequest], temperature: float = 1.0,
          ) -> RunResult:
    """Add each request at its arrival time, step the engine, record per-request timings."""
    result = RunResult()
    pending = deque(sorted(workload, key=lambda r: r.arrival_seconds))
    arrivals: dict[str, float] = {}
    start = engine.clock()
    while pending or engine.has_unfinished_requests():
        now = engine.clock()
        while pending and start + pending[0].arrival_seconds <= now:
            req = pending.popleft()
            arrivals[req.request_id] = start + req.arrival_seconds
            engine.add_request(req.request_id, req.prompt_token_ids, SamplingParams(
                max_tokens=req.max_tokens, temperature=temperature, ignore_eos=True),
                arrival_time=arrivals[req.request_id])
        if not engine.has_unfinished_requests():
            time.sleep(max(0.0, start + pending[0].arrival_seconds - engine.clock()))
            continue
        running_before = engine.scheduler.num_running
        outputs = engine.step()
        now = engine.clock()
        result.num_steps += 1
        result.sum_batch_size += max(running_before, engine.scheduler.num_running)
        for out in outputs:
            if out.token_ids and out.num_output_tokens == 1:
                result.ttft.append(now - arrivals[out.request_id])
            if out.finished:
                result.e2e.append(now - arrivals[out.request_id])
                result.num_output_tokens += out.num_output_tokens
        if not outputs and not engine.scheduler.running:
            _sleep_until_work(engine, pending, start)
    result.wall_seconds = engine.clock() - start
    return result


def _sleep_until_work(engine: LLMEngine, pending: deque[BenchRequest], start: float) -> None:
    """Static batching waiting to fill: sleep to its timeout or the next arrival."""
    now = engine.clock()
    wake = engine.scheduler.next_wakeup(now)
    next_arrival = start + pending[0].arrival_seconds if pending else math.inf
    deadline = min(wake if wake is not None else math.inf, next_arrival, now + 0.1)
    time.sleep(max(0.0, deadline - now))
