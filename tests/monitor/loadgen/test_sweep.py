"""Sweeps: saturation, the SLO bracket and its interpolation, the knee, the plot; capacity."""

from __future__ import annotations

import asyncio
import math

import pytest

from monitor.loadgen.capacity import CapacityInputs, plan
from monitor.loadgen.metrics import Distribution, LatencySlo, RunSummary
from monitor.loadgen.runner import Endpoint
from monitor.loadgen.sweep import (
    SweepOptions,
    SweepPoint,
    interpolate_capacity,
    knee,
    slo_bracket,
    sweep,
)
from monitor.loadgen.workload import LengthDist, WorkloadSpec
from tests.monitor.loadgen.scripted_server import Script, scripted_server


def _point(rate: float, throughput: float, p99: float, attainment: float) -> SweepPoint:
    summary = RunSummary(
        requests=100, completed=100, failed=0, errors={}, duration_seconds=10,
        offered_rate=rate, max_concurrency=None, request_throughput=throughput,
        output_throughput=throughput * 10, total_token_throughput=throughput * 20,
        mean_prompt_tokens=10, mean_output_tokens=10,
        latency={"ttft": Distribution(100, p99 / 2, {"p50": p99 / 2, "p99": p99})},
        queue_time=None, slo="x", slo_attainment=attainment, goodput=throughput * attainment)
    return SweepPoint(rate, summary, 0.0, False, "")


def test_knee_is_where_latency_turns_up() -> None:
    points = [_point(r, r, lat, 1.0) for r, lat in
              [(1, 0.050), (2, 0.051), (4, 0.053), (8, 0.060), (12, 0.120), (14, 0.600)]]
    found = knee(points, "ttft_p99")
    assert found is not None and found.rate in (8, 12)
    assert knee(points[:2], "ttft_p99") is None           # too few points
    flat = [_point(r, r, 0.05, 1.0) for r in (1, 2, 3, 4)]
    assert knee(flat, "ttft_p99") is None


def test_slo_capacity_is_bracketed_and_interpolated() -> None:
    points = [_point(1, 1, 0.05, 1.0), _point(2, 2, 0.05, 0.995), _point(4, 4, 0.3, 0.95),
              _point(8, 7, 1.0, 0.99)]   # a noisy pass above a failure does not count
    low, high = slo_bracket(points, 0.99)
    assert low is not None and high is not None and (low.rate, high.rate) == (2, 4)
    assert interpolate_capacity(low, high, 0.99) == pytest.approx(2 + 2 * 0.005 / 0.045)
    low, high = slo_bracket(points[:2], 0.99)
    assert low is not None and low.rate == 2 and high is None


def test_a_sweep_finds_saturation_and_the_capacity_under_slo() -> None:
    # 4 requests at a time, 0.1 s each: the server serves 40 req/s at most; TTFT <= 0.15 s
    # holds while little queueing happens, well below that.
    script = Script(ttft=0.1, itl=0.0, capacity=4)
    options = SweepOptions(slo=LatencySlo(ttft=0.15), attainment_target=0.95,
                           rates=(5.0, 10.0, 20.0, 40.0, 80.0), step_seconds=3.0,
                           warmup_seconds=0.5, refine_steps=1, settle_max_seconds=10)
    lines: list[str] = []
    with scripted_server(script) as (url, _):
        result = asyncio.run(sweep(Endpoint(url, "m"), WorkloadSpec(
            output_len=LengthDist("fixed", 1)), options, progress=lines.append))
    assert result.saturation_rate in (40.0, 80.0)
    assert script.max_in_flight == 4
    rates = [p.rate for p in result.points]
    assert rates[:3] == [5.0, 10.0, 20.0] and len(lines) == len(rates)
    assert result.max_rate_under_slo is not None and 5.0 <= result.max_rate_under_slo <= 40.0
    low, high = result.bracket
    assert low is not None and high is not None and low <= result.max_rate_under_slo <= high
    saturated = [p for p in result.points if p.saturated]
    assert saturated and "backlog grew" in saturated[0].reason
    assert "max rate with >= 95.0%" in result.format()


def test_the_plot_is_a_png(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from monitor.loadgen.plot import plot_sweep
    from monitor.loadgen.sweep import SweepResult

    result = SweepResult(SweepOptions(slo=LatencySlo(ttft=0.2)),
                         [_point(r, r, 0.05 * r, 1.0 - r / 100) for r in (1, 2, 4, 8)])
    result.max_rate_under_slo, result.knee = 3.0, result.points[2]
    plot_sweep(result, tmp_path / "s.png")
    data = (tmp_path / "s.png").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20000


def test_capacity_plan_arithmetic() -> None:
    inputs = CapacityInputs(replica_max_qps=10, measured_input_tokens=200,
                            measured_output_tokens=100, peak_qps=50, target_utilization=0.5,
                            redundancy=1, prefill_weight=0.1, gpus_per_replica=2,
                            gpu_hour_price=3.0)
    p = plan(inputs)
    assert p.replica_qps_at_peak_mix == 10
    assert p.replicas_for_peak == 10 and p.replicas == 11       # 50 / (10 * 0.5) + 1
    assert p.utilization_at_peak == pytest.approx(50 / 110)
    assert p.cost_per_hour == 11 * 2 * 3.0
    assert p.cost_per_million_output_tokens == pytest.approx(66 / (50 * 100 * 3600) * 1e6)
    assert p.replica_cost_per_million_output_tokens == pytest.approx(6 / (10 * 100 * 3600) * 1e6)
    # Twice the output per request at peak: each replica takes about half the rate.
    longer = plan(CapacityInputs(replica_max_qps=10, measured_input_tokens=200,
                                 measured_output_tokens=100, peak_qps=50,
                                 peak_output_tokens=200, target_utilization=0.5))
    assert longer.replica_qps_at_peak_mix == pytest.approx(10 * 120 / 220)
    assert longer.replicas_for_peak == math.ceil(50 / (10 * 120 / 220 * 0.5))
    assert longer.cost_per_hour is None
    with pytest.raises(ValueError, match="target utilization"):
        CapacityInputs(replica_max_qps=1, measured_input_tokens=1, measured_output_tokens=1,
                       peak_qps=1, target_utilization=0)
