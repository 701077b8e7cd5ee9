"""Simulated engines with the schema's own instrumentation (exporters.instrumentation on a
registry each), driven step by step with a seeded generator so their pages are known at any
step, and served on one loopback port for the embedded scraper (``/engine-{i}/metrics``).

The fault of ``faulty`` from ``fault_step`` on: first tokens five times slower and 60% of the
same offered requests refused (``rejected``), so the tokens served fall to 40% at the same
load: what an anomaly detector pages on and a canary judge fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from typing import Final

import numpy as np
from prometheus_client import CollectorRegistry, generate_latest

from exporters.instrumentation import PrometheusEngineMetrics, RequestStats, StepStats
from tests.http_thread import serving_handler

MODEL: Final = "tiny"
REQUESTS_PER_STEP: Final = 40
PROMPT_TOKENS: Final = 128
OUTPUT_TOKENS: Final = 64
KV_BLOCKS: Final = 1000


@dataclass(frozen=True, slots=True)
class Fault:
    faulty: int
    fault_step: int
    ttft_factor: float = 5.0
    rejected_fraction: float = 0.6


class SchemaEngines:
    """``num_engines`` engines; ``advance()`` runs one step of traffic on every engine."""

    def __init__(self, num_engines: int, fault: Fault, seed: int = 7) -> None:
        self.fault = fault
        self.registries = [CollectorRegistry() for _ in range(num_engines)]
        self.metrics = [PrometheusEngineMetrics(r, MODEL, max_num_seqs=64,
                                                max_num_batched_tokens=8192, kv_block_size=16,
                                                kv_cache_bytes=2**30) for r in self.registries]
        self.rng = np.random.default_rng(seed)
        self.step = 0
        self._pages = self._render()

    def page(self, index: int) -> str:
        """Engine ``index``'s page at the current step."""
        return self._pages[index]

    def advance(self) -> None:
        self.step += 1
        for index, metrics in enumerate(self.metrics):
            self._run_step(metrics, self.step >= self.fault.fault_step
                           and index == self.fault.faulty)
        self._pages = self._render()

    def _render(self) -> list[str]:
        return [generate_latest(registry).decode() for registry in self.registries]

    def _run_step(self, metrics: PrometheusEngineMetrics, faulty: bool) -> None:
        rng = self.rng
        offered = REQUESTS_PER_STEP + int(rng.integers(-4, 5))
        num_requests = round(offered * (1 - self.fault.rejected_fraction)) if faulty else offered
        itl = rng.lognormal(np.log(0.02), 0.15, size=OUTPUT_TOKENS - 1)
        for _ in range(num_requests):
            ttft = float(rng.lognormal(np.log(0.15), 0.2)) * (self.fault.ttft_factor
                                                             if faulty else 1.0)
            decode = float(rng.lognormal(np.log(0.02), 0.15)) * (OUTPUT_TOKENS - 1)
            metrics.record_request(RequestStats(
                "length", None, PROMPT_TOKENS, OUTPUT_TOKENS, 0.01, ttft, ttft - 0.01, decode,
                ttft + decode))
        for _ in range(offered - num_requests):
            metrics.record_rejected("rejected")
        running = int(rng.integers(6, 11))
        used = int(KV_BLOCKS * float(rng.uniform(0.25, 0.35)))
        metrics.record_step(StepStats(
            running, 0, 0, running, PROMPT_TOKENS * num_requests, OUTPUT_TOKENS * num_requests,
            0, 0, used, KV_BLOCKS, 0.001, 0.02, 0.001, [float(x) for x in itl],
            OUTPUT_TOKENS * num_requests))


@contextmanager
def serving(engines: SchemaEngines) -> Iterator[str]:
    """The engines' pages on one loopback port: yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            parts = self.path.strip("/").split("/")
            if len(parts) == 2 and parts[1] == "metrics" and parts[0].startswith("engine-"):
                body = engines.page(int(parts[0].removeprefix("engine-"))).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
            else:
                body = b"not found\n"
                self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    with serving_handler(Handler, "schema-engines") as url:
        yield url
