"""From a sweep on a real reference server to a warning before the page, end to end.

A short sweep recorded in a SQLite store; ``slo propose`` makes the SLO file (loaded by the
project's loader, then through ``rules generate`` and promtool); ``inferwatch serve`` watches
the server with those SLOs and ``capacity: {sweep: NAME}``; real Poisson load at 0.3, 0.7
and 2x the measured capacity. The headroom falls step by step, and the headroom ticket fires
at 0.7x (warning below 40% here), before the TTFT SLO's burn-rate page at 2x.

The server is slowed by its latency fault (100 ms per engine step, 8 batch slots), so its
capacity is set by slots and step time rather than by a CPU that the test shares.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from bench.headroom import BenchOptions, Outcome, run_bench
from monitor.cli import main
from tests.integration import unavailable

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(360)]

OPTIONS = BenchOptions(
    server_args=("--model", "tiny", "--max-num-seqs", "8"), input_len="uniform:20-60",
    output_len="fixed:16", ttft_seconds=1.0, tpot_seconds=0.25, step_latency_seconds=0.1,
    sweep_rates=(1.0, 2.0, 3.0, 4.0, 6.0), sweep_step_seconds=6.0, refine_steps=1,
    ramp=(0.3, 0.7, 2.0), ramp_step_seconds=12.0, warn_below_ratio=0.4, for_seconds=2.0,
    window_seconds=10.0, pin_cpus=False)


def end_of_step_headroom(outcome: Outcome) -> list[float]:
    """The headroom the monitor reported last in each load step."""
    ends = []
    for step in outcome.steps:
        values = [p.headroom for p in outcome.polls
                  if p.rate == step.rate and p.headroom is not None]
        assert values, f"no headroom during the {step.rate} req/s step: {outcome.polls}"
        ends.append(values[-1])
    return ends


def test_the_headroom_warning_leads_the_slo_page(tmp_path: Path) -> None:
    outcome = run_bench(OPTIONS, tmp_path)
    capacity = outcome.capacity
    assert capacity["max_rate"] > 0 and set(capacity["capacity"]) == {
        "requests_per_second", "prompt_tokens_per_second", "output_tokens_per_second",
        "requests_in_flight"}
    assert capacity["binding_reason"]
    headroom = end_of_step_headroom(outcome)
    assert headroom[0] > headroom[1] > headroom[2], headroom   # falls as load rises
    assert headroom[2] < 0                                      # past capacity at 2x
    assert outcome.ticket_at is not None, outcome.polls
    assert outcome.page_at is None or outcome.ticket_at < outcome.page_at, (
        outcome.ticket_at, outcome.page_at)
    _rules_pass_promtool(tmp_path / "proposed-slos.yaml", tmp_path / "rules")


def _rules_pass_promtool(slos: Path, out: Path) -> None:
    assert main(["rules", "generate", "--slos", str(slos), "--out", str(out)]) == 0
    promtool = shutil.which("promtool")
    if promtool is None:
        unavailable("promtool is not installed")
    done = subprocess.run([promtool, "check", "rules", str(out / "inferwatch-slo.rules.yml")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
