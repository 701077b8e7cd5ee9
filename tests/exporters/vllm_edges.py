"""vLLM 0.32's real bucket edges, read from the page recorded here from a live ``vllm serve``
(tests/fixtures/engines/vllm-0.32-cpu-live.prom), never from a table."""

from __future__ import annotations

import math

from tests.exporters.engine_fixtures import parse_fixture

LIVE_PAGE = "vllm-0.32-cpu-live.prom"


def vllm_edges(family: str) -> tuple[float, ...]:
    """Finite ``le`` edges of one vLLM histogram family, e.g.
    ``vllm:e2e_request_latency_seconds``, as the live page has them."""
    page = parse_fixture(LIVE_PAGE)
    samples = page.families[family].samples
    edges = {float(s.labels["le"]) for s in samples if s.name == f"{family}_bucket"}
    return tuple(sorted(e for e in edges if math.isfinite(e)))
