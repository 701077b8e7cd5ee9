"""The binding dimension and the capacity per dimension of a sweep, worked out by hand."""

from __future__ import annotations

from typing import Any

import pytest

from monitor.loadgen.dimensions import Dimension, SloLimits, binding, profile

LIMITS = SloLimits(ttft=0.2, tpot=0.05)


def point(rate: float, attainment: float, *, ttft_p99: float = 0.05, tpot_p99: float = 0.01,
          saturated: bool = False, failed: int = 0, requests: int = 100,
          prompt: float = 100.0, output: float = 32.0, e2e_mean: float = 0.5
          ) -> dict[str, Any]:
    return {"rate": rate, "attainment": attainment, "saturated": saturated,
            "backlog_slope": 1.5 if saturated else 0.0, "reason": "",
            "summary": {"requests": requests, "failed": failed,
                        "errors": {"rejected": failed} if failed else {},
                        "mean_prompt_tokens": prompt, "mean_output_tokens": output,
                        "latency": {"ttft": {"mean": 0.03, "percentiles": {"p50": 0.02,
                                                                           "p99": ttft_p99}},
                                    "tpot": {"mean": 0.005, "percentiles": {"p99": tpot_p99}},
                                    "e2e": {"mean": e2e_mean, "percentiles": {"p99": 1.0}}}}}


@pytest.mark.parametrize(("failing", "expected", "words"), [
    (point(8, 0.9, ttft_p99=0.36, tpot_p99=0.03), Dimension.PROMPT_TOKENS,
     "TTFT 1.80x its limit, TPOT 0.60x its limit: prefill"),
    (point(8, 0.9, ttft_p99=0.1, tpot_p99=0.08), Dimension.OUTPUT_TOKENS,
     "TTFT 0.50x its limit, TPOT 1.60x its limit: decode"),
    (point(8, 0.9, ttft_p99=0.36, saturated=True), Dimension.IN_FLIGHT,
     "backlog grew 1.50 req/s"),
    (point(8, 0.95, failed=2), Dimension.IN_FLIGHT, "2% of requests failed (rejected 2)"),
], ids=["TTFT most over its limit: prefill binds", "TPOT most over: decode binds",
        "a growing backlog: KV/queue binds", "more failures than the SLO allows: KV/queue"])
def test_the_binding_dimension_is_what_broke_first(failing: dict[str, Any],
                                                   expected: Dimension, words: str) -> None:
    points = [point(2, 1.0), point(4, 0.995), failing, point(16, 0.2, ttft_p99=5.0)]
    found = binding(points, 0.99, LIMITS)
    assert found.dimension is expected and found.at_rate == 8
    assert words in found.reason


def test_failures_within_the_budget_leave_the_latency_to_judge() -> None:
    # 1 failure in 100 is not more than 1 - 0.99 allows: the latency limits decide.
    found = binding([point(4, 0.98, failed=1, ttft_p99=0.3)], 0.99, LIMITS)
    assert found.dimension is Dimension.PROMPT_TOKENS


def test_a_sweep_that_never_missed_the_slo_has_no_binding_dimension() -> None:
    found = binding([point(2, 1.0), point(4, 1.0)], 0.99, LIMITS)
    assert found.dimension is None and "up to 4 req/s" in found.reason


def test_capacity_per_dimension_is_the_rate_times_the_mix_of_the_step_below() -> None:
    # 6 req/s interpolated between 4 (passing) and 8 (failing); the 4 req/s step's mix:
    # 120 prompt and 40 output tokens, 0.75 s end to end -> 720 and 240 tokens/s, and
    # 6 x 0.75 = 4.5 requests in flight (Little's law).
    document = {"max_rate_under_slo": 6.0, "attainment_target": 0.99,
                "slo_seconds": {"ttft": 0.2, "tpot": 0.05, "e2e": None},
                "points": [point(2, 1.0), point(4, 1.0, prompt=120, output=40, e2e_mean=0.75),
                           point(8, 0.5, ttft_p99=0.5)]}
    found = profile(document)
    assert found is not None
    assert found.capacity == {Dimension.REQUESTS: 6.0, Dimension.PROMPT_TOKENS: 720.0,
                              Dimension.OUTPUT_TOKENS: 240.0, Dimension.IN_FLIGHT: 4.5}
    assert found.binding.dimension is Dimension.PROMPT_TOKENS and not found.lower_bound
    assert found.to_json()["binding"] == "prompt_tokens_per_second"


def test_limits_are_read_from_older_sweeps_description() -> None:
    assert SloLimits.of({"slo": "TTFT <= 200 ms and TPOT <= 50 ms"}) == LIMITS
    assert SloLimits.of({"slo": "E2E <= 1500 ms"}) == SloLimits(e2e=1.5)


def test_no_capacity_no_profile() -> None:
    assert profile({"max_rate_under_slo": None, "points": [point(2, 0.5)]}) is None


def test_a_saturated_step_caps_the_capacity_at_what_it_achieved() -> None:
    # The sweep met the SLO at 32 req/s but the backlog grew there: 26.9 req/s got done.
    saturated = point(32, 1.0, saturated=True)
    saturated["summary"]["request_throughput"] = 26.9
    found = profile({"max_rate_under_slo": 32.0, "attainment_target": 0.99,
                     "slo": "TTFT <= 200 ms", "points": [point(16, 1.0), saturated]})
    assert found is not None and found.max_rate == 26.9
    assert found.capacity[Dimension.OUTPUT_TOKENS] == pytest.approx(26.9 * 32)
    assert found.binding.dimension is Dimension.IN_FLIGHT and found.binding.at_rate == 32
