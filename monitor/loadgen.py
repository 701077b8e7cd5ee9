"""Open-loop streaming load against an OpenAI-compatible /v1/completions endpoint.

Metrics follow vLLM's benchmark definitions: TTFT, ITL per chunk, TPOT = (E2EL - TTFT) /
(output tokens - 1), E2EL; output token counts come from the server-reported usage.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import httpx
import numpy as np


@dataclass(frozen=True, slots=True)
class RequestSpec:
    arrival_seconds: float     # offset from the start of the run
    prompt: str
    max_tokens: int


@dataclass(slots=True)
class RequestRecord:
    spec: RequestSpec
    sent_at: float = 0.0                       # seconds since start
    chunk_times: list[float] = field(default_factory=list)
    finished_at: float = 0.0
    status: int = 0
    error: str | None = None
    num_output_tokens: int = 0

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.error is None

    @property
    def ttft(self) -> float | None:
        return self.chunk_times[0] - self.sent_at if self.chunk_times else None

    @property
    def e2e(self) -> float:
        return self.finished_at - self.sent_at

    @property
    def itls(self) -> list[float]:
        return [b - a for a, b in zip(self.chunk_times, self.chunk_times[1:])]

    @property
    def tpot(self) -> float | None:
        if self.ttft is None or self.num_output_tokens < 2:
            return None
        return (self.e2e - self.ttft) / (self.num_output_tokens - 1)


def synthetic_workload(num_requests: int, rate: float, seed: int = 0,
                       mean_input_chars: int = 200, mean_output_tokens: int = 64,
                       sigma: float = 0.6) -> list[RequestSpec]:
    """Poisson arrivals; lognormal prompt and output lengths with the given means."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate, num_requests) if rate > 0 else np.zeros(num_requests)
    arrivals = np.cumsum(gaps) - gaps[0]
    mu_in = math.log(mean_input_chars) - sigma**2 / 2
    mu_out = math.log(mean_output_tokens) - sigma**2 / 2
    inputs = np.maximum(1, rng.lognormal(mu_in, sigma, num_requests)).astype(int)
    outputs = np.maximum(1, rng.lognormal(mu_out, sigma, num_requests)).astype(int)
    words = "the quick brown fox jumps over a lazy dog while tokens stream by".split()
    specs = []
    for i in range(num_requests):
        text = " ".join(rng.choice(words, size=max(1, inputs[i] // 5)))[: inputs[i]]
        specs.append(RequestSpec(float(arrivals[i]), text or "hi", int(outputs[i])))
    return specs


async def run_load(base_url: str, model: str, workload: Sequence[RequestSpec],
                   timeout_seconds: float = 120.0) -> list[RequestRecord]:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=256)
    timeout = httpx.Timeout(timeout_seconds, connect=10.0)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=timeout) as client:
        start = time.perf_counter()
        tasks = [asyncio.create_task(_one(client, model, spec, start)) for spec in workload]
        return list(await asyncio.gather(*tasks))


async def _one(client: httpx.AsyncClient, model: str, spec: RequestSpec,
               start: float) -> RequestRecord:
    record = RequestRecord(spec)
    await asyncio.sleep(max(0.0, spec.arrival_seconds - (time.perf_counter() - start)))
    body = {"model": model, "prompt": spec.prompt, "max_tokens": spec.max_tokens,
            "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}}
    record.sent_at = time.perf_counter() - start
    try:
        async with client.stream("POST", "/v1/completions", json=body) as resp:
            record.status = resp.status_code
            if resp.status_code != 200:
                record.error = (await resp.aread()).decode(errors="replace")[:200]
            else:
                await _read_events(resp, record, start)
    except httpx.HTTPError as exc:
        record.error = f"{type(exc).__name__}: {exc}"
    record.finished_at = time.perf_counter() - start
    return record


async def _read_events(resp: httpx.Response, record: RequestRecord, start: float) -> None:
    async for line in resp.aiter_lines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        event = json.loads(line[6:])
        if "error" in event:
            record.error = event["error"].get("message", "error")
        elif event.get("choices"):
            record.chunk_times.append(time.perf_counter() - start)
        elif event.get("usage"):
            record.num_output_tokens = event["usage"]["completion_tokens"]


@dataclass(frozen=True, slots=True)
class LoadSummary:
    num_requests: int
    num_ok: int
    duration_seconds: float
    output_tokens_per_second: float
    requests_per_second: float
    percentiles: dict[str, dict[str, float]]   # metric -> {"p50": seconds, ...}

    def format(self) -> str:
        lines = [f"requests: {self.num_ok}/{self.num_requests} ok in "
                 f"{self.duration_seconds:.1f} s; {self.requests_per_second:.2f} req/s; "
                 f"{self.output_tokens_per_second:.1f} output tokens/s"]
        for metric, ps in self.percentiles.items():
            values = "  ".join(f"{k}={v * 1000:8.1f} ms" for k, v in ps.items())
            lines.append(f"{metric:>5}: {values}")
        return "\n".join(lines)


def summarize(records: Sequence[RequestRecord],
              quantiles: Sequence[float] = (50, 90, 95, 99)) -> LoadSummary:
    ok = [r for r in records if r.ok]
    duration = max((r.finished_at for r in records), default=0.0) - \
        min((r.sent_at for r in records), default=0.0)
    samples = {
        "ttft": [r.ttft for r in ok if r.ttft is not None],
        "tpot": [r.tpot for r in ok if r.tpot is not None],
        "itl": [x for r in ok for x in r.itls],
        "e2e": [r.e2e for r in ok],
    }
    pct = {m: {f"p{q:g}": float(np.percentile(v, q)) for q in quantiles}
           for m, v in samples.items() if v}
    tokens = sum(r.num_output_tokens for r in ok)
    return LoadSummary(len(records), len(ok), duration,
                       tokens / duration if duration else 0.0,
                       len(ok) / duration if duration else 0.0, pct)
