"""The canary judge: the Hodges-Lehmann shift and its interval against brute force, both
computation paths alike, A/A false positives and CI coverage, power against a real shift,
NaN handling, and the Kayenta-style scoring of a run."""

from __future__ import annotations

from typing import Literal

import json
import math
import statistics

import numpy as np
import pytest

from monitor.canary import judge as judge_module
from monitor.canary.judge import (
    Direction,
    JudgeConfig,
    MetricSpec,
    Outcome,
    Verdict,
    compare,
    hodges_lehmann,
    judge,
)


def brute_force(baseline: list[float], canary: list[float],
                confidence: float) -> tuple[float, float, float]:
    """R's wilcox.test(canary, baseline, conf.int=TRUE) with the normal approximation, from
    all pairwise differences sorted: median, d_(k), d_(nm-k+1)."""
    diffs = sorted(c - b for c in canary for b in baseline)
    nm = len(diffs)
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    k = max(1, math.floor(nm / 2 - z * math.sqrt(nm * (len(baseline) + len(canary) + 1) / 12)))
    return statistics.median(diffs), diffs[k - 1], diffs[nm - k]


# --- the shift and its interval ---------------------------------------------------------


def test_hand_checkable_case() -> None:
    # Differences of [4, 5, 6] - [1, 2, 3]: 1 2 2 3 3 3 4 4 5, median 3. With 9 pairs
    # k = floor(4.5 - 1.96 * sqrt(9 * 7 / 12)) = 0, so the interval is the full range.
    assert hodges_lehmann([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], 0.95) == (3.0, 1.0, 5.0)
    assert brute_force([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], 0.95) == (3.0, 1.0, 5.0)


@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95, 0.99])
@pytest.mark.parametrize("ties", [False, True])
def test_matches_brute_force(confidence: float, ties: bool) -> None:
    rng = np.random.default_rng(11)
    baseline = rng.lognormal(0.0, 0.4, 23)
    canary = rng.lognormal(0.1, 0.4, 31)
    if ties:
        baseline, canary = np.round(baseline, 1), np.round(canary, 1)
    expected = brute_force(baseline.tolist(), canary.tolist(), confidence)
    assert hodges_lehmann(baseline, canary, confidence) == pytest.approx(expected, abs=1e-12)
    result = compare(baseline, canary, MetricSpec("x"), confidence)
    assert (result.shift, result.ci_low, result.ci_high) == pytest.approx(expected, abs=1e-12)


def test_even_number_of_pairs_averages_the_middle_two() -> None:
    baseline, canary = [0.0, 10.0], [1.0, 2.0]  # differences -9 -8 1 2: median -3.5
    assert hodges_lehmann(baseline, canary)[0] == -3.5


@pytest.mark.parametrize("ties", [False, True])
def test_bisection_path_matches_brute_force(monkeypatch: pytest.MonkeyPatch,
                                            ties: bool) -> None:
    monkeypatch.setattr(judge_module, "EXACT_PAIRS_LIMIT", 0)
    rng = np.random.default_rng(5)
    baseline, canary = rng.gamma(2.0, 1.0, 37), rng.gamma(2.0, 1.2, 29)
    if ties:
        baseline, canary = np.round(baseline), np.round(canary)
    expected = brute_force(baseline.tolist(), canary.tolist(), 0.95)
    span = float(np.ptp(np.concatenate([baseline, canary])))
    got = hodges_lehmann(baseline, canary, 0.95)
    assert got == pytest.approx(expected, abs=1e-9 * span)


def test_both_paths_agree_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(9)
    baseline = rng.lognormal(0.0, 0.5, 2000)
    canary = rng.lognormal(0.03, 0.5, 2000)
    assert baseline.size * canary.size == judge_module.EXACT_PAIRS_LIMIT  # the exact path
    exact = hodges_lehmann(baseline, canary, 0.95)
    monkeypatch.setattr(judge_module, "EXACT_PAIRS_LIMIT", baseline.size * canary.size - 1)
    bisected = hodges_lehmann(baseline, canary, 0.95)
    span = float(np.ptp(np.concatenate([baseline, canary])))
    assert bisected == pytest.approx(exact, abs=1e-9 * span)
    assert exact[1] < exact[0] < exact[2]


# --- error rates: false positives, coverage, power ---------------------------------------


def test_a_a_false_positives_and_coverage() -> None:
    rng = np.random.default_rng(2024)
    gated = MetricSpec("x", direction=Direction.EITHER)
    pure = MetricSpec("x", direction=Direction.EITHER, allowed_increase=1.0,
                      allowed_decrease=1.0)
    reps, flagged, flagged_pure, covered = 500, 0, 0, 0
    for _ in range(reps):
        baseline = rng.lognormal(0.0, 0.25, 300)
        canary = rng.lognormal(0.0, 0.25, 300)
        flagged += compare(baseline, canary, gated).verdict in (Verdict.HIGH, Verdict.LOW)
        result = compare(baseline, canary, pure)
        flagged_pure += result.verdict in (Verdict.HIGH, Verdict.LOW)
        covered += result.ci_low <= 0.0 <= result.ci_high
    assert flagged / reps <= 0.03
    assert 0.92 <= covered / reps <= 0.98
    # With no allowed change a verdict is significance alone: exactly the misses of the CI.
    assert flagged_pure == reps - covered
    assert flagged < flagged_pure


def test_a_ten_percent_slowdown_is_caught() -> None:
    # Kayenta's gate (the point estimate against the allowed 5%) at a wide spread.
    rng = np.random.default_rng(77)
    spec = MetricSpec("ttft")
    reps, high = 200, 0
    for _ in range(reps):
        baseline = rng.lognormal(0.0, 0.5, 1000)
        canary = 1.1 * rng.lognormal(0.0, 0.5, 1000)
        high += compare(baseline, canary, spec, gate="estimate").verdict is Verdict.HIGH
    assert high / reps >= 0.95


def test_the_interval_gate_needs_confidence_that_the_change_exceeds_the_allowed() -> None:
    rng = np.random.default_rng(78)
    spec = MetricSpec("tpot")
    caught = {"interval": 0, "estimate": 0}
    passed_small = {"interval": 0, "estimate": 0}
    reps = 200
    for _ in range(reps):
        baseline = rng.lognormal(0.0, 0.2, 1000)
        slowed = 1.1 * rng.lognormal(0.0, 0.2, 1000)
        slightly = 1.045 * rng.lognormal(0.0, 0.2, 1000)  # a host 4.5% slower: within 5%
        gates: tuple[Literal["interval", "estimate"], ...] = ("interval", "estimate")
        for gate in gates:
            verdict = compare(baseline, slowed, spec, gate=gate).verdict
            caught[gate] += verdict is Verdict.HIGH
            verdict = compare(baseline, slightly, spec, gate=gate).verdict
            passed_small[gate] += verdict is Verdict.PASS
    assert caught["interval"] / reps >= 0.95 and caught["estimate"] / reps >= 0.95
    assert passed_small["interval"] / reps >= 0.99
    assert passed_small["interval"] > passed_small["estimate"]
    result = compare(rng.lognormal(0.0, 0.2, 1000), 1.1 * rng.lognormal(0.0, 0.2, 1000), spec)
    assert "(interval bound" in result.reason


def test_direction_gates_the_verdict() -> None:
    rng = np.random.default_rng(3)
    baseline = rng.lognormal(0.0, 0.5, 1000)
    slower = 1.3 * rng.lognormal(0.0, 0.5, 1000)
    faster = 0.7 * rng.lognormal(0.0, 0.5, 1000)
    increase, decrease = MetricSpec("x"), MetricSpec("x", direction=Direction.DECREASE)
    either = MetricSpec("x", direction=Direction.EITHER)
    assert compare(baseline, slower, increase).verdict is Verdict.HIGH
    assert compare(baseline, slower, either).verdict is Verdict.HIGH
    result = compare(baseline, slower, decrease)
    assert result.verdict is Verdict.PASS and result.ci_low > 0
    assert "harmless" in result.reason
    assert compare(baseline, faster, decrease).verdict is Verdict.LOW
    assert compare(baseline, faster, either).verdict is Verdict.LOW
    assert compare(baseline, faster, increase).verdict is Verdict.PASS


def test_significant_but_within_the_allowed_change_passes() -> None:
    rng = np.random.default_rng(4)
    baseline = rng.lognormal(0.0, 0.1, 5000)
    canary = 1.02 * rng.lognormal(0.0, 0.1, 5000)
    result = compare(baseline, canary, MetricSpec("x"))
    assert result.ci_low > 0 and result.p_value < 0.05  # significant...
    assert 1.0 < result.effect < 1.05  # ...but small
    assert result.verdict is Verdict.PASS
    assert compare(baseline, canary, MetricSpec("x", allowed_increase=1.01)).verdict \
        is Verdict.HIGH


def test_result_fields_and_reason() -> None:
    rng = np.random.default_rng(8)
    baseline = rng.lognormal(np.log(0.2), 0.3, 800)
    canary = rng.lognormal(np.log(0.24), 0.3, 700)
    r = compare(baseline, canary, MetricSpec("ttft", group="latency", critical=True))
    assert (r.name, r.group, r.critical, r.verdict) == ("ttft", "latency", True, Verdict.HIGH)
    assert (r.n_baseline, r.n_canary) == (800, 700)
    assert r.median_baseline == pytest.approx(float(np.median(baseline)))
    assert r.mean_canary == pytest.approx(float(np.mean(canary)))
    assert r.effect == pytest.approx((r.median_baseline + r.shift) / r.median_baseline)
    assert r.effect_ci == pytest.approx(
        ((r.median_baseline + r.ci_low) / r.median_baseline,
         (r.median_baseline + r.ci_high) / r.median_baseline))
    assert r.effect_ci[0] < r.effect < r.effect_ci[1]
    assert r.p_value < 1e-6
    assert "n=700/800" in r.reason and "> allowed 1.05" in r.reason
    assert r.reason.endswith(": high")


# --- NaN, empty, identical, constant -----------------------------------------------------


def test_nan_remove_and_replace() -> None:
    baseline = [1.0, 2.0, math.nan, 3.0, math.inf]
    canary = [1.5, 2.5, 3.5]
    removed = compare(baseline, canary, MetricSpec("x"))
    assert (removed.n_baseline, removed.n_nan_baseline) == (3, 2)
    assert removed.median_baseline == 2.0
    replaced = compare(baseline, canary, MetricSpec("x", nan_strategy="replace"))
    assert (replaced.n_baseline, replaced.n_nan_baseline) == (5, 2)
    assert replaced.median_baseline == 1.0  # 0 0 1 2 3
    assert replaced.mean_baseline == pytest.approx(6.0 / 5)


@pytest.mark.parametrize("baseline, canary", [
    ([], [1.0, 2.0]),
    ([1.0, 2.0], []),
    ([math.nan, math.nan], [1.0, 2.0]),
])
def test_empty_is_nodata(baseline: list[float], canary: list[float]) -> None:
    r = compare(baseline, canary, MetricSpec("x"))
    assert r.verdict is Verdict.NODATA
    assert math.isnan(r.shift) and math.isnan(r.p_value)
    assert r.to_dict()["effect"] is None


def test_all_nan_replaced_is_data() -> None:
    r = compare([math.nan, math.nan], [0.0, 0.0], MetricSpec("x", nan_strategy="replace"))
    assert r.verdict is Verdict.PASS and r.n_baseline == 2


def test_identical_samples_pass() -> None:
    values = [0.3, 0.1, 0.2, 0.2, 0.9]
    r = compare(values, list(reversed(values)), MetricSpec("x", direction=Direction.EITHER))
    assert r.verdict is Verdict.PASS
    assert (r.shift, r.ci_low, r.ci_high, r.effect, r.p_value) == (0.0, 0.0, 0.0, 1.0, 1.0)


def test_constant_samples_pass() -> None:
    r = compare([0.0] * 10, [0.0] * 7, MetricSpec("err", allowed_absolute=0.01))
    assert r.verdict is Verdict.PASS and r.effect == 0.0 and r.effect_ci == (0.0, 0.0)


# --- absolute effects (error rate) -------------------------------------------------------


def test_allowed_absolute_with_a_zero_baseline() -> None:
    rng = np.random.default_rng(12)
    baseline = np.zeros(60)
    spec = MetricSpec("error_rate", allowed_absolute=0.01, critical=True)
    broken = rng.uniform(0.03, 0.07, 60)
    r = compare(baseline, broken, spec)
    assert r.verdict is Verdict.HIGH
    assert r.effect == r.shift and r.effect > 0.01
    assert r.effect_ci == (r.ci_low, r.ci_high)
    slightly = rng.uniform(0.002, 0.006, 60)  # significant, but within +0.01
    r = compare(baseline, slightly, spec)
    assert r.ci_low > 0 and r.verdict is Verdict.PASS
    # As a ratio the effect is undefined on a zero baseline: a significant rise is HIGH.
    r = compare(baseline, broken, MetricSpec("error_rate"))
    assert math.isnan(r.effect) and r.verdict is Verdict.HIGH
    assert r.to_dict()["effect"] is None


# --- scoring a run -----------------------------------------------------------------------

_RNG = np.random.default_rng(100)
_BASE = _RNG.lognormal(0.0, 0.3, 400)
_SLOW = 2.0 * _RNG.lognormal(0.0, 0.3, 400)


def run(verdicts: dict[str, str], metrics: list[MetricSpec],
        weights: dict[str, float], **thresholds: float) -> judge_module.Judgement:
    """Judge ``metrics`` with data chosen to give each one its verdict ("pass", "high", or
    "nodata": no samples at all)."""
    baseline = {name: _BASE for name, v in verdicts.items() if v != "nodata"}
    canary = {name: (_SLOW if v == "high" else _BASE)
              for name, v in verdicts.items() if v != "nodata"}
    result = judge(baseline, canary, JudgeConfig(tuple(metrics), weights, **thresholds))
    assert {r.name: r.verdict.value for r in result.results} == verdicts
    return result


def test_group_weights() -> None:
    metrics = [MetricSpec("a1", group="a"), MetricSpec("a2", group="a"),
               MetricSpec("b1", group="b")]
    j = run({"a1": "pass", "a2": "high", "b1": "pass"}, metrics, {"a": 60, "b": 40})
    assert j.group_scores == {"a": 50.0, "b": 100.0}
    assert j.score == pytest.approx(0.6 * 50 + 0.4 * 100)
    assert j.outcome is Outcome.FAIL and j.critical_failures == ()


def test_unweighted_groups_share_the_rest() -> None:
    metrics = [MetricSpec("a1", group="a"), MetricSpec("b1", group="b"),
               MetricSpec("c1", group="c")]
    j = run({"a1": "pass", "b1": "high", "c1": "pass"}, metrics, {"a": 50})
    assert j.score == pytest.approx(0.5 * 100 + 0.25 * 0 + 0.25 * 100)
    assert j.outcome is Outcome.MARGINAL


def test_a_group_without_data_is_left_out() -> None:
    metrics = [MetricSpec("a1", group="a"), MetricSpec("a2", group="a"),
               MetricSpec("b1", group="b")]
    j = run({"a1": "pass", "a2": "nodata", "b1": "nodata"}, metrics, {"a": 50, "b": 50})
    assert j.group_scores == {"a": 100.0}  # a2's NODATA does not count against a either
    assert j.score == 100.0 and j.outcome is Outcome.PASS


def test_no_data_at_all_fails() -> None:
    j = run({"a1": "nodata"}, [MetricSpec("a1")], {})
    assert j.group_scores == {} and j.score == 0.0 and j.outcome is Outcome.FAIL


def test_critical_failure_zeroes_the_score() -> None:
    metrics = [MetricSpec("p99", critical=True), MetricSpec("m1"), MetricSpec("m2")]
    j = run({"p99": "high", "m1": "pass", "m2": "pass"}, metrics, {})
    assert j.critical_failures == ("p99",)
    assert j.score == 0.0 and j.outcome is Outcome.FAIL
    assert j.group_scores == {"default": pytest.approx(200 / 3)}


@pytest.mark.parametrize("spec", [MetricSpec("m", critical=True),
                                  MetricSpec("m", must_have_data=True)])
def test_required_data_missing_fails(spec: MetricSpec) -> None:
    j = run({"m": "nodata", "other": "pass"}, [spec, MetricSpec("other")], {})
    assert j.critical_failures == ("m",)
    assert j.score == 0.0 and j.outcome is Outcome.FAIL


def test_optional_data_missing_does_not_fail() -> None:
    j = run({"m": "nodata", "other": "pass"}, [MetricSpec("m"), MetricSpec("other")], {})
    assert j.critical_failures == () and j.outcome is Outcome.PASS


@pytest.mark.parametrize("passed, expected", [
    (4, Outcome.PASS),       # 100
    (3, Outcome.MARGINAL),   # 75: at the marginal threshold
    (2, Outcome.FAIL),       # 50
])
def test_thresholds(passed: int, expected: Outcome) -> None:
    names = [f"m{i}" for i in range(4)]
    verdicts = {n: ("pass" if i < passed else "high") for i, n in enumerate(names)}
    j = run(verdicts, [MetricSpec(n) for n in names], {}, pass_threshold=95.0,
            marginal_threshold=75.0)
    assert j.score == pytest.approx(100.0 * passed / 4)
    assert j.outcome is expected


def test_report_and_json() -> None:
    metrics = [MetricSpec("ttft", group="latency"), MetricSpec("error_rate", group="errors",
                                                               allowed_absolute=0.01)]
    j = run({"ttft": "high", "error_rate": "nodata"}, metrics, {"latency": 60, "errors": 40})
    json.dumps(j.to_dict(), allow_nan=False)  # NaN became None
    assert j.to_dict()["outcome"] == "fail"
    text = j.format()
    lines = text.splitlines()
    assert lines[0].startswith("canary FAIL: score 0.0")
    assert "ttft" in lines[1] and "HIGH" in lines[1] and "n=400/400" in lines[1]
    assert "error_rate" in lines[2] and "NODATA" in lines[2]
    assert lines[-1] == "group scores: latency 0.0"


def test_config_rejects_duplicates_and_bad_confidence() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        JudgeConfig((MetricSpec("a"), MetricSpec("a")), {})
    with pytest.raises(ValueError, match="confidence"):
        JudgeConfig((MetricSpec("a"),), {}, confidence=1.0)


def test_samples_too_few_for_an_interval_pass() -> None:
    # 3 against 3, every canary value higher: the widest interval [1, 5] excludes 0, but an
    # exact two-sided p is 2/20 = 0.1, so no 95% interval exists and nothing is flagged (a
    # short live run has only a few per-interval p99s: issue 21).
    result = compare([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], MetricSpec("ttft_p99", critical=True))
    assert result.verdict is Verdict.PASS
    assert "too few samples for a 95% interval" in result.reason
    assert (result.ci_low, result.ci_high) == (1.0, 5.0)
    # One more on each side is enough: 4 against 4 all higher is flagged.
    four = compare([1.0, 2.0, 3.0, 3.5], [4.0, 5.0, 6.0, 7.0], MetricSpec("ttft_p99"))
    assert four.verdict is Verdict.HIGH


def clustered(rng: np.random.Generator, clusters: int, size: int,
              spread: float) -> tuple[np.ndarray, list[int]]:
    """Samples sharing a random level per cluster (a server's stall over an interval), with
    noise around it; and each sample's cluster."""
    levels = rng.lognormal(0.0, spread, clusters)
    values = np.concatenate([level * rng.lognormal(0.0, 0.2, size) for level in levels])
    return values, [k for k in range(clusters) for _ in range(size)]


def test_clustered_samples_widen_the_interval() -> None:
    # A/A with per-interval levels: taken as independent, 40 samples a side are far too
    # sure and most comparisons are "significant"; with their clusters the interval is
    # widened by the design effect and the false-positive rate is back near 5% (seeded:
    # 30% naive, 7.7% with clusters, a median design effect of 4.5).
    rng = np.random.default_rng(21)
    pure = MetricSpec("ttft", direction=Direction.EITHER, allowed_increase=1.0,
                      allowed_decrease=1.0)
    reps, naive, robust, effects = 300, 0, 0, []
    for _ in range(reps):
        (b, b_groups), (c, c_groups) = (clustered(rng, 8, 5, 0.5) for _ in range(2))
        naive += compare(b, c, pure).verdict is not Verdict.PASS
        result = compare(b, c, pure, clusters=(b_groups, c_groups))
        robust += result.verdict is not Verdict.PASS
        effects.append(result.design_effect)
    assert naive / reps > 0.2
    assert robust / reps <= 0.12
    assert statistics.median(effects) > 2.5


def test_independent_samples_keep_their_interval() -> None:
    rng = np.random.default_rng(22)
    b, c = rng.lognormal(0.0, 0.3, 200), rng.lognormal(0.1, 0.3, 200)
    labels = [k % 10 for k in range(200)]
    plain = compare(b, c, MetricSpec("ttft"))
    with_clusters = compare(b, c, MetricSpec("ttft"), clusters=(labels, labels))
    # Random clusters of independent samples: a design effect near 1, the same verdict.
    assert 1.0 <= with_clusters.design_effect < 1.6
    assert with_clusters.verdict is plain.verdict
    assert with_clusters.ci_low <= plain.ci_low and with_clusters.ci_high >= plain.ci_high
    assert with_clusters.to_dict()["design_effect"] == with_clusters.design_effect
