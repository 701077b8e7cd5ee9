"""The arithmetic panels, worked out by hand and checked by Prometheus' own engine (promtool
test rules) on series whose rates are known: cost, tokens per replica, error ratio, batch
utilization and token budget, replicas."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from .dashboard_queries import load_dashboards, panels, substitute
from .test_generate import GRAFANA_VALUES, INFERENCE, promtool

pytestmark = pytest.mark.integration

A = 'job="llm",model="m",instance="a:8000"'
B = 'job="llm",model="m",instance="b:8000"'
# One sample a minute for 20 minutes. Two replicas of model m, 500 output tokens/s each;
# 98 finished requests/s in all, 1/s of them a model error; 2/s rejected before the engine.
INPUT_SERIES = [
    {"series": f"gen_ai_server_generation_tokens_total{{{A}}}", "values": "0+30000x20"},
    {"series": f"gen_ai_server_generation_tokens_total{{{B}}}", "values": "0+30000x20"},
    {"series": f"gen_ai_server_requests_running{{{A}}}", "values": "16x20"},
    {"series": f"gen_ai_server_requests_running{{{B}}}", "values": "8x20"},
    {"series": f"gen_ai_server_batch_size_max{{{A}}}", "values": "64x20"},
    {"series": f"gen_ai_server_batch_size_max{{{B}}}", "values": "64x20"},
    # Steps of 512 tokens on A (2/s), of 1024 on B (1/s); a token budget of 2048 each.
    {"series": f"gen_ai_server_iteration_tokens_sum{{{A}}}", "values": "0+61440x20"},
    {"series": f"gen_ai_server_iteration_tokens_count{{{A}}}", "values": "0+120x20"},
    {"series": f"gen_ai_server_iteration_tokens_sum{{{B}}}", "values": "0+61440x20"},
    {"series": f"gen_ai_server_iteration_tokens_count{{{B}}}", "values": "0+60x20"},
    {"series": f"gen_ai_server_batched_tokens_max{{{A}}}", "values": "2048x20"},
    {"series": f"gen_ai_server_batched_tokens_max{{{B}}}", "values": "2048x20"},
    {"series": f'gen_ai_server_requests_total{{{A},finish_reason="length"}}',
     "values": "0+2880x20"},
    {"series": f'gen_ai_server_requests_total{{{B},finish_reason="error"}}',
     "values": "0+60x20"},
    {"series": f'gen_ai_server_requests_total{{{B},finish_reason="stop"}}',
     "values": "0+2940x20"},
    {"series": f'gen_ai_server_request_errors_total{{{B},error_type="model_error"}}',
     "values": "0+60x20"},
    {"series": f'gen_ai_server_request_errors_total{{{A},error_type="rejected"}}',
     "values": "0+120x20"},
]

# (panel title, expected samples at 10 minutes), by hand:
EXPECTED = [
    # $2.5/GPU-hour x 1 GPU x 2 replicas / (1000 tok/s x 3600 s/h) x 1e6 = $1.3889 per 1M
    ("Cost per million output tokens", [('{model="m"}', 2.5 * 2 / 3.6)]),
    # 1000 tok/s over 2 replicas
    ("Tokens/s per replica", [('{model="m"}', 500.0)]),
    # (1 + 2) errors/s over (98 finished + 2 rejected) requests/s
    ("Error ratio", [("{}", 0.03)]),
    ("Replicas", [('{model="m"}', 2.0)]),
]


def _target_expr(title: str) -> str:
    dashboard = load_dashboards()[INFERENCE]
    panel = next(p for p in panels(dashboard) if p["title"] == title)
    return substitute(panel["targets"][0]["expr"], {**GRAFANA_VALUES, "__rate_interval": "5m"})


def _batch_utilization() -> list[tuple[str, list[tuple[str, float]]]]:
    dashboard = load_dashboards()[INFERENCE]
    panel = next(p for p in panels(dashboard) if p["title"] == "Batch and KV-cache utilization")
    running, budget = (substitute(panel["targets"][k]["expr"],
                                  {**GRAFANA_VALUES, "__rate_interval": "5m"}) for k in (0, 1))
    return [(running, [('{model="m"}', 24 / 128)]),  # 16 + 8 running of 64 + 64 slots
            # (1024 + 1024) tokens/s over 3 steps/s, against one step's budget of 2048
            (budget, [('{model="m"}', 2048 / 3 / 2048)])]


def within(expr: str, value: float) -> str:
    """1 where ``expr`` is ``value`` to 1 part in 1e9 (promtool compares floats exactly, and
    rates carry float noise: 500.00000000000006)."""
    return f"abs(({expr}) - {value!r}) < bool {abs(value) * 1e-9!r}"


def test_arithmetic_panels_compute_the_hand_worked_values(tmp_path: Path) -> None:
    cases = [(_target_expr(title), samples) for title, samples in EXPECTED]
    cases += _batch_utilization()
    tests: list[dict[str, Any]] = [{
        "interval": "1m",
        "input_series": INPUT_SERIES,
        "promql_expr_test": [
            {"expr": within(expr, value), "eval_time": "10m",
             "exp_samples": [{"labels": labels, "value": 1}]}
            for expr, samples in cases for labels, value in samples],
    }]
    path = tmp_path / "formulas.test.yml"
    path.write_text(yaml.safe_dump({"rule_files": [], "tests": tests}, sort_keys=False))
    done = subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
