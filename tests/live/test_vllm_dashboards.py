"""The dashboards on a live vLLM: `inferwatch bridge` in front of `vllm serve`, a real Prometheus
scraping the bridge every second with the SLO rules loaded, streamed load from inferwatch's
own generator; then every panel query of the inference dashboard runs as Grafana runs it.

What vLLM cannot feed is stated, not hidden: ``NO_DATA`` names each panel that stays empty on
the CPU build with the reason; the test fails when a panel outside it has no data, and when a
panel inside it starts having data (then the list is out of date).
"""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path

import pytest

from monitor.loadgen import LengthDist, WorkloadSpec, send_requests
from tests.live.vllm_server import START_TIMEOUT_SECONDS, RunningVllm
from tests.monitor.dashboards.dashboard_queries import ROOT, load_dashboards, substitute, targets
from tests.monitor.dashboards.live_stack import fast_rules, prometheus_with_rules, running_bridge
from tests.monitor.dashboards.test_panels_on_prometheus import _grafana_values, _series

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.live_engine,
              pytest.mark.timeout(START_TIMEOUT_SECONDS + 300)]  # it may start vLLM

DASHBOARD = "inferwatch-inference.json"
NUM_REQUESTS, RATE = 24, 3.0
_P = DASHBOARD + " / "
_NO_BATCH_LIMIT = "vLLM exports no batch limit (max_num_seqs): gen_ai_server_batch_size_max"
_NO_TOKEN_BUDGET = ("vLLM exports no token budget (max_num_batched_tokens): "
                    "gen_ai_server_batched_tokens_max")
_NO_BATCH_SIZE = ("vLLM has no per-step batch-size histogram (iteration_tokens counts tokens, "
                  "not sequences)")
_NO_GPU = "the CPU build has no GPU, and no DCGM exporter runs beside it"
_MONITOR = "the monitor's own series (its /metrics), not scraped in this stack"
# Panel targets that a vLLM 0.32 on the CPU build leaves empty, and why (from a live run).
NO_DATA: dict[str, str] = {
    _P + "Batch and KV-cache utilization / A": _NO_BATCH_LIMIT,
    _P + "Batch and KV-cache utilization / B": _NO_TOKEN_BUDGET,
    **{_P + f"Batch size (quantiles and mean) / {q}": _NO_BATCH_SIZE for q in "ABCD"},
    _P + "Batch size distribution / A": _NO_BATCH_SIZE,
    _P + "Capacity headroom / A": _MONITOR,
    _P + "Capacity headroom / B": _MONITOR,
    _P + "GPU compute utilization / A": _NO_GPU,
    **{_P + f"GPU memory and KV cache / {q}": _NO_GPU for q in "ABC"},
    _P + "GPU memory-bandwidth utilization / A": _NO_GPU,
    _P + "KV-cache share of GPU memory / A": _NO_GPU,
}


def _load(url: str, model: str) -> None:
    spec = WorkloadSpec(input_len=LengthDist("uniform", 16, 64),
                        output_len=LengthDist("uniform", 8, 24), seed=5)
    asyncio.run(send_requests(url, model, spec.requests(NUM_REQUESTS, RATE),
                              timeout_seconds=60))


def test_inference_panels_on_a_live_vllm(vllm: RunningVllm, tmp_path: Path) -> None:
    rules = fast_rules(ROOT / "alerts" / "inferwatch-slo.rules.yml", tmp_path / "rules.yml")
    with running_bridge(vllm.metrics_url, "vllm") as bridge, \
            prometheus_with_rules(tmp_path, {"vllm": bridge}, rules) as prometheus:
        start = time.time()
        _load(vllm.url, vllm.model)
        time.sleep(3)  # the last counters scraped and the rules evaluated
        end = time.time()
        values = _grafana_values(start, end)
        empty: dict[str, str] = {}
        filled: set[str] = set()
        dashboards = {DASHBOARD: load_dashboards()[DASHBOARD]}
        for target in targets(dashboards):
            expr = substitute(target.expr, values)
            series = _series(prometheus, expr, bool(target.target["instant"]), start, end)
            if any(math.isfinite(v) for _, points in series for v in points):
                filled.add(target.name)
            else:
                empty[target.name] = expr
    print("empty on live vLLM:\n" + "\n".join(f"{k}: {v}" for k, v in sorted(empty.items())))
    assert set(empty) == set(NO_DATA), (
        "panels without data that NO_DATA does not explain: "
        f"{sorted(set(empty) - set(NO_DATA))}; explained but filled: "
        f"{sorted(set(NO_DATA) & filled)}")
    assert filled, "no panel had data"
