"""A run's figures, with vLLM's benchmark definitions (benchmarks/benchmark_serving.py).

TTFT: send to first token chunk. TPOT: (E2EL - TTFT) / (output tokens - 1), per request.
ITL: gaps between consecutive chunks, pooled over requests. E2EL: send to last byte. The
client-side queue time (waiting for a concurrency slot) is reported apart and is in none of
them. Throughputs divide by the measured span: first intended send to last finish.
Goodput (DistServe) is the rate of requests that met every latency SLO given.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from monitor.loadgen.runner import RequestRecord, RunResult

DEFAULT_PERCENTILES = (50.0, 90.0, 95.0, 99.0)
LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")


@dataclass(frozen=True, slots=True)
class LatencySlo:
    """Per-request latency limits in seconds; a request is good when it meets every one."""

    ttft: float | None = None
    tpot: float | None = None
    e2e: float | None = None

    def met(self, record: RequestRecord) -> bool:
        if not record.ok:
            return False
        ttft, tpot = record.ttft, record.tpot
        if self.ttft is not None and (ttft is None or ttft > self.ttft):
            return False
        if self.tpot is not None and tpot is not None and tpot > self.tpot:
            return False
        return self.e2e is None or record.e2e <= self.e2e

    def describe(self) -> str:
        parts = [f"{name} <= {value * 1000:g} ms" for name, value in
                 (("TTFT", self.ttft), ("TPOT", self.tpot), ("E2E", self.e2e))
                 if value is not None]
        return " and ".join(parts) or "none"


@dataclass(frozen=True, slots=True)
class Distribution:
    count: int
    mean: float
    percentiles: dict[str, float]       # "p50" -> seconds

    @classmethod
    def of(cls, values: Sequence[float], percentiles: Sequence[float]) -> Distribution | None:
        if not values:
            return None
        array = np.asarray(values, dtype=float)
        return cls(len(array), float(array.mean()),
                   {f"p{q:g}": float(np.percentile(array, q)) for q in percentiles})


@dataclass(frozen=True, slots=True)
class RunSummary:
    requests: int
    completed: int
    failed: int
    errors: dict[str, int]              # error type -> count
    duration_seconds: float
    offered_rate: float | None          # None for a closed loop
    max_concurrency: int | None
    request_throughput: float           # completed requests/s
    output_throughput: float            # output tokens/s of completed requests
    total_token_throughput: float       # (prompt + output) tokens/s
    mean_prompt_tokens: float | None
    mean_output_tokens: float | None
    latency: dict[str, Distribution]    # ttft, tpot, itl, e2e
    queue_time: Distribution | None     # client-side wait for a slot
    slo: str | None = None
    slo_attainment: float | None = None   # fraction of measured requests meeting the SLO
    goodput: float | None = None          # such requests per second
    # Client vs server, on the requests whose engine timed them itself (vLLM's per-request
    # metrics): client TTFT, the engine's queue and prefill, and what is left (frontend,
    # network, client).
    server_view: dict[str, Distribution] | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def format(self) -> str:
        rate = "closed loop" if self.offered_rate is None else f"{self.offered_rate:g} req/s"
        lines = [
            f"requests: {self.completed}/{self.requests} ok in {self.duration_seconds:.1f} s "
            f"(offered {rate}, concurrency {self.max_concurrency or 'unbounded'})",
            f"throughput: {self.request_throughput:.2f} req/s, {self.output_throughput:.1f} "
            f"output tok/s, {self.total_token_throughput:.1f} total tok/s",
        ]
        if self.errors:
            lines.append("errors: " + ", ".join(f"{k} {v}" for k, v in sorted(self.errors.items())))
        for name, dist in self.latency.items():
            values = "  ".join(f"{k}={v * 1000:9.1f}" for k, v in dist.percentiles.items())
            lines.append(f"{name:>5} ms: mean={dist.mean * 1000:9.1f}  {values}")
        if self.queue_time is not None and self.queue_time.percentiles.get("p99", 0) > 0:
            q = self.queue_time
            lines.append(f"client queue ms: mean={q.mean * 1000:.1f} "
                         + " ".join(f"{k}={v * 1000:.1f}" for k, v in q.percentiles.items()))
        if self.server_view:
            lines.append(f"client vs server TTFT ({self.server_view['ttft'].count} requests "
                         "timed by the engine):")
            for name, dist in self.server_view.items():
                values = "  ".join(f"{k}={v * 1000:9.1f}" for k, v in dist.percentiles.items())
                lines.append(f"  {SERVER_VIEW_NAMES[name]:>22} ms: mean={dist.mean * 1000:9.1f}"
                             f"  {values}")
        if self.slo_attainment is not None:
            lines.append(f"SLO ({self.slo}): {self.slo_attainment:.2%} of requests, "
                         f"goodput {self.goodput:.2f} req/s")
        return "\n".join(lines)


def summarize(result: RunResult | Sequence[RequestRecord],
              percentiles: Sequence[float] = DEFAULT_PERCENTILES,
              slo: LatencySlo | None = None) -> RunSummary:
    if isinstance(result, RunResult):
        records = result.measured
        rate = None if np.isinf(result.rate) else result.rate
        concurrency = result.max_concurrency
    else:
        records, rate, concurrency = [r for r in result if not r.warmup], None, None
    ok = [r for r in records if r.ok]
    start = min((r.intended_at for r in records), default=0.0)
    end = max((r.finished_at for r in records), default=0.0)
    duration = max(end - start, 1e-9) if records else 0.0
    samples = latency_samples(ok)
    output_tokens = sum(r.num_output_tokens for r in ok)
    prompt_tokens = [r.prompt_tokens for r in ok if r.prompt_tokens is not None]
    errors = Counter(r.error_type or "unknown" for r in records if not r.ok)
    latency = {name: dist for name, values in samples.items()
               if (dist := Distribution.of(values, percentiles)) is not None}
    good = sum(1 for r in records if slo.met(r)) if slo is not None else None
    per_second = (lambda n: n / duration) if duration else (lambda n: 0.0)
    return RunSummary(
        requests=len(records), completed=len(ok), failed=len(records) - len(ok),
        errors=dict(errors), duration_seconds=duration, offered_rate=rate,
        max_concurrency=concurrency, request_throughput=per_second(len(ok)),
        output_throughput=per_second(output_tokens),
        total_token_throughput=per_second(output_tokens + sum(prompt_tokens)),
        mean_prompt_tokens=float(np.mean(prompt_tokens)) if prompt_tokens else None,
        mean_output_tokens=output_tokens / len(ok) if ok else None,
        latency=latency,
        queue_time=Distribution.of([r.queue_time for r in records], percentiles),
        slo=slo.describe() if slo is not None else None,
        slo_attainment=(good / len(records) if records else None) if good is not None else None,
        goodput=per_second(good) if good is not None else None,
        server_view=server_view(ok, percentiles),
    )


SERVER_VIEW_NAMES = {"ttft": "client TTFT", "server_queue": "engine queue",
                     "server_prefill": "engine prefill", "frontend_overhead": "frontend+network"}


def server_view(ok: Sequence[RequestRecord], percentiles: Sequence[float]
                ) -> dict[str, Distribution] | None:
    """The per-request split of client TTFT, over requests the engine timed itself."""
    timed = [r for r in ok if r.frontend_overhead is not None]
    if not timed:
        return None
    values = {"ttft": [r.ttft for r in timed], "server_queue": [r.server_queue for r in timed],
              "server_prefill": [r.server_prefill for r in timed],
              "frontend_overhead": [r.frontend_overhead for r in timed]}
    return {name: dist for name, column in values.items()
            if (dist := Distribution.of([v for v in column if v is not None], percentiles))
            is not None}


def latency_samples(ok: Sequence[RequestRecord]) -> dict[str, list[float]]:
    """Per-request TTFT, TPOT and E2E, and every ITL gap, of successful requests."""
    return {
        "ttft": [t for r in ok if (t := r.ttft) is not None],
        "tpot": [t for r in ok if (t := r.tpot) is not None],
        "itl": [x for r in ok for x in r.itls],
        "e2e": [r.e2e for r in ok],
    }


def write_records(result: RunResult, path: str | Path) -> None:
    """One JSON object per request (warm-up included, flagged), times as unix seconds."""
    with open(path, "w", encoding="utf-8") as out:
        for record in result.records:
            out.write(json.dumps(record.to_json(result.wall_start)) + "\n")


def write_summary(summary: RunSummary, path: str | Path,
                  extra: Mapping[str, Any] | None = None) -> None:
    document = summary.to_json()
    if extra:
        document.update(extra)
    Path(path).write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
