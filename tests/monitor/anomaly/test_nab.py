"""NAB scoring: hand-computed row scores, normalization, windows, thresholds, and a
cross-check against a line-by-line port of NAB's sweeper.

Hand computations use scaled_sigmoid(x) = 2 / (1 + exp(5x)) - 1 = -tanh(2.5 x); a
detection inside a window scores tanh(-2.5 x) / tanh(2.5) (NAB divides by maxTP)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.anomaly.nab import (
    MAX_TP,
    PROFILES,
    STANDARD,
    SeriesScore,
    Window,
    alert_starts,
    merge_windows,
    normalized,
    optimize_threshold,
    probationary_length,
    random_scores,
    scaled_sigmoid,
    score_corpus,
    score_series,
    window_metrics,
    windows_around,
)

N = 100
WIN = [Window(40, 49, 45)]  # width 10


def detect(*rows: int, n: int = N) -> np.ndarray:
    det = np.zeros(n, dtype=bool)
    det[list(rows)] = True
    return det


def raw(*rows: int, profile: str = "standard") -> float:
    return score_series(detect(*rows), WIN, PROFILES[profile], probation=0).raw


def test_scaled_sigmoid() -> None:
    assert scaled_sigmoid(-1.0) == pytest.approx(0.98661430, abs=1e-8) == MAX_TP
    assert scaled_sigmoid(-0.5) == pytest.approx(0.84828364, abs=1e-8)
    assert scaled_sigmoid(0.0) == 0.0
    assert scaled_sigmoid(1.0) == pytest.approx(-0.98661430, abs=1e-8)
    assert scaled_sigmoid(3.0) == scaled_sigmoid(50.0) == -1.0


def test_true_positive_scores_fall_through_the_window() -> None:
    # first row: position -1 -> tanh(2.5) / maxTP = exactly tp_weight
    assert raw(40) == pytest.approx(1.0)
    # middle, row 45: position -(49 - 45 + 1) / 10 = -0.5 -> tanh(1.25) / tanh(2.5)
    assert raw(45) == pytest.approx(0.85979257, abs=1e-8)
    # last row: position -0.1 -> tanh(0.25) / tanh(2.5)
    assert raw(49) == pytest.approx(0.24824155, abs=1e-8)
    assert raw(40) > raw(45) > raw(49) > 0


def test_only_the_first_detection_in_a_window_counts() -> None:
    # row 42: position -0.8 -> tanh(2) / tanh(2.5); row 47 adds nothing
    score = score_series(detect(42, 47), WIN, STANDARD, probation=0)
    assert score.raw == pytest.approx(0.97710684, abs=1e-8)
    assert (score.tp, score.fp, score.fn) == (1, 0, 0)


def test_false_positives_and_misses() -> None:
    miss = -1.0  # the window has no detection: -fn_weight
    # before any window: -fp_weight
    assert raw(10) == pytest.approx(miss - 0.11)
    # just after the window: past = (50 - 49) / (10 - 1) -> 0.11 * -tanh(2.5 / 9)
    assert raw(50) == pytest.approx(miss - 0.02979318, abs=1e-8)
    # one width after: past = 1 -> 0.11 * -tanh(2.5)
    assert raw(58) == pytest.approx(miss - 0.10852757, abs=1e-8)
    # three widths after and beyond: -fp_weight
    assert raw(76) == raw(99) == pytest.approx(miss - 0.11)
    assert raw(50) > raw(58) > raw(76)
    score = score_series(detect(10, 50, 58), WIN, STANDARD, probation=0)
    assert (score.tp, score.fp, score.fn) == (0, 3, 1)
    assert score.raw == pytest.approx(miss - 0.11 - 0.02979318 - 0.10852757, abs=1e-8)


def test_profiles_weigh_misses_and_false_positives() -> None:
    assert raw() == -1.0
    assert raw(profile="reward_low_fn_rate") == -2.0  # a miss costs twice
    assert raw(10, 40, profile="reward_low_fp_rate") == pytest.approx(1.0 - 0.22)
    assert raw(10, 40, profile="reward_low_fn_rate") == pytest.approx(1.0 - 0.11)
    low_fn = score_series(detect(), WIN, PROFILES["reward_low_fn_rate"], probation=0)
    assert low_fn.null == -2.0 and low_fn.perfect == pytest.approx(1.0)


def test_probationary_period_is_not_scored() -> None:
    assert probationary_length(100) == 15
    assert probationary_length(10_000) == 750  # NAB: min(floor(0.15 n), 0.15 * 5000)
    # detections at rows 5 and 14 fall in the default probation (15 rows): only the miss
    assert score_series(detect(5, 14), WIN, STANDARD).raw == -1.0
    assert score_series(detect(5, 14), WIN, STANDARD, probation=0).raw == pytest.approx(
        -1.0 - 0.22)
    # a window ending inside the probation is not counted at all
    early = [Window(2, 8, 5)]
    score = score_series(detect(5), early, STANDARD, probation=10)
    assert (score.raw, score.tp, score.fn, score.null, score.perfect) == (0.0, 0, 0, 0.0, 0.0)
    # a window straddling it: perfect is a detection at its first scorable row
    straddling = score_series(detect(), [Window(5, 24, 10)], STANDARD, probation=15)
    assert straddling.perfect == pytest.approx(math.tanh(2.5 * 10 / 20) / MAX_TP)


def test_normalization() -> None:
    windows = [[Window(40, 49, 45)], [Window(20, 29, 25), Window(70, 79, 75)]]

    def corpus(*detections: np.ndarray) -> list[SeriesScore]:
        return [score_series(d, w, STANDARD, probation=0) for d, w in zip(detections, windows)]

    assert normalized(corpus(detect(40), detect(20, 70))) == pytest.approx(100.0)
    assert normalized(corpus(detect(), detect())) == pytest.approx(0.0)
    # raw 1 + 1 - 1 = 1 (the window at 70 missed); null -3; perfect 3 -> 100 * 4 / 6
    assert normalized(corpus(detect(40), detect(20))) == pytest.approx(200 / 3)
    # false positives can take it below zero
    assert normalized(corpus(detect(10), detect(10))) == pytest.approx(100 * -0.22 / 6)
    with pytest.raises(ValueError, match="no scorable anomaly window"):
        normalized([score_series(detect(), [], STANDARD)])


def test_windows_around() -> None:
    # width int(0.1 * 1000 / 1) = 100, centred: 300 -/+ 50
    assert windows_around(1000, [300]) == [Window(250, 350, 300)]
    # clipped to the data
    assert windows_around(1000, [5, 990]) == [Window(0, 30, 5), Window(965, 999, 990)]
    # width int(100 / 3) = 33, +/- 16: [84, 116] and [114, 146] overlap and merge
    assert windows_around(1000, [100, 130, 700]) == [Window(84, 146, 100),
                                                     Window(684, 716, 700)]
    assert windows_around(1000, []) == []
    assert merge_windows([Window(20, 30, 25), Window(0, 10, 5), Window(10, 12, 11)]) == [
        Window(0, 12, 5), Window(20, 30, 25)]


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="start <= anomaly <= end"):
        Window(10, 5, 7)
    with pytest.raises(ValueError, match="start <= anomaly <= end"):
        Window(10, 20, 25)
    with pytest.raises(ValueError, match="ends past"):
        score_series(detect(), [Window(90, 100, 95)], STANDARD)
    with pytest.raises(ValueError, match="sorted and disjoint"):
        score_series(detect(), [Window(40, 49, 45), Window(45, 60, 50)], STANDARD)
    with pytest.raises(ValueError, match="sorted and disjoint"):
        score_series(detect(), [Window(60, 70, 65), Window(40, 49, 45)], STANDARD)
    with pytest.raises(ValueError, match="one-dimensional"):
        score_series(np.zeros((10, 2), dtype=bool), [], STANDARD)
    with pytest.raises(ValueError, match="outside"):
        windows_around(100, [100])
    with pytest.raises(ValueError, match="12 alert flags for a series of 100"):
        window_metrics(np.zeros(12, dtype=bool), WIN, n=100)
    with pytest.raises(ValueError, match="2 anomaly starts for 1 windows"):
        window_metrics([41], WIN, anomaly_starts=[1, 2])
    with pytest.raises(ValueError, match="NaN"):
        optimize_threshold([(np.full(10, np.nan), [])], STANDARD)


def test_threshold_optimization_separates_a_clean_case() -> None:
    rng = np.random.default_rng(1)
    series = []
    for starts in ([300, 700], [500]):
        scores = rng.uniform(0.0, 0.4, 1000)
        windows = windows_around(1000, starts)
        for w in windows:
            scores[w.start] = 0.9  # perfect detections, at the first row of each window
            scores[w.start + 5: w.start + 8] = 0.7  # later ones in the window: no effect
        series.append((scores, windows))
    threshold, score = optimize_threshold(series, STANDARD)
    assert 0.4 < threshold <= 0.9  # 0.7 scores the same; ties go to the highest threshold
    assert score == pytest.approx(100.0)
    assert normalized(score_corpus(series, threshold, STANDARD)) == pytest.approx(100.0)


def test_threshold_optimization_matches_brute_force() -> None:
    rng = np.random.default_rng(7)
    series = []
    for n, anomalies in ((400, [100, 250]), (300, [200]), (500, [])):
        scores = np.round(rng.random(n), 2)  # ties
        for a in anomalies:
            scores[a - 10: a + 5] += rng.uniform(0.0, 0.5)
        series.append((scores, windows_around(n, anomalies)))
    for profile in PROFILES.values():
        threshold, best = optimize_threshold(series, profile)
        candidates = np.unique(np.concatenate([s for s, _ in series]))
        brute = max(normalized(score_corpus(series, t, profile)) for t in candidates)
        assert best == pytest.approx(brute)
        assert normalized(score_corpus(series, threshold, profile)) == pytest.approx(best)
    # a detector that only raises false alarms is best never detecting
    scores = np.linspace(1, 0, 100)  # highest far before the window at the end
    threshold, best = optimize_threshold([(scores, [Window(90, 99, 95)])], STANDARD,
                                         probation=20)
    assert threshold > scores[20] and best == 0.0


def test_random_baseline() -> None:
    assert np.array_equal(random_scores(50, seed=3), random_scores(50, seed=3))
    assert not np.array_equal(random_scores(50, seed=3), random_scores(50, seed=4))
    series = [(random_scores(2000, seed=i), windows_around(2000, [800 + 200 * i]))
              for i in range(5)]
    _, score = optimize_threshold(series, STANDARD)
    assert 0.0 <= score < 60.0


def test_window_metrics() -> None:
    windows = [Window(40, 49, 45), Window(70, 79, 72)]
    firing = detect(10, 11, 12, 42, 43, 44, 45, 47)  # starts at 10, 42, 47
    assert alert_starts(firing).tolist() == [10, 42, 47]
    m = window_metrics(firing, windows)
    assert (m.windows, m.detected, m.alerts, m.true_alerts, m.false_alerts) == (2, 1, 3, 2, 1)
    assert m.delays == (-3, None)  # 42 - 45: early, inside the window
    assert m.recall == 0.5 and m.precision == pytest.approx(2 / 3) and m.mean_delay == -3.0
    # alert-start indices, anomaly starts given apart, probation
    m = window_metrics([10, 48, 75], windows, anomaly_starts=[44, 70], probation=20)
    assert (m.alerts, m.false_alerts, m.delays, m.recall, m.precision) == (
        2, 0, (4, 5), 1.0, 1.0)
    empty = window_metrics(np.zeros(N, dtype=bool), [])
    assert math.isnan(empty.recall) and math.isnan(empty.precision)
    assert empty.mean_delay is None


def nab_sweeper_score(detections: np.ndarray, limits: list[tuple[int, int]],
                      tp: float, fp: float, fn: float, probation: int) -> float:
    """NAB's Sweeper.calcSweepScore + calcScoreByThreshold, row by row, for binary
    detections (rows as timestamps)."""
    points: list[tuple[bool, float, str | None]] = []  # (detected, sweep score, window)
    limits = list(limits)
    cur: tuple[int, int] | None = None
    cur_width = cur_right = prev_width = prev_right = 0.0
    for i, d in enumerate(detections):
        if limits and i == limits[0][0]:
            cur = limits.pop(0)
            cur_right, cur_width = float(cur[1]), float(cur[1] - cur[0] + 1)
        if cur is not None:
            weighted = scaled_sigmoid(-(cur_right - i + 1) / cur_width) * tp / MAX_TP
        else:
            past = 3.0 if not prev_width else abs(prev_right - i) / (prev_width - 1.0)
            weighted = scaled_sigmoid(past) * fp
        name = ("probationary" if i < probation else
                (None if cur is None else str(cur[0])))
        points.append((d, weighted, name))
        if cur is not None and i == cur[1]:
            prev_right, prev_width, cur = float(i), cur_width, None
    parts = {"fp": 0.0}
    for _, _, name in points:
        if name not in ("probationary", None):
            parts[name] = -fn
    for d, weighted, name in points:
        if not d or name == "probationary":
            continue
        if name is None:
            parts["fp"] += weighted
        else:
            parts[name] = max(parts[name], weighted)
    return sum(parts.values())


def test_matches_nab_sweeper() -> None:
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = int(rng.integers(50, 400))
        anomalies = sorted(set(rng.integers(0, n, int(rng.integers(0, 4))).tolist()))
        windows = [w for w in windows_around(n, anomalies) if w.width > 1]
        det = rng.random(n) < rng.uniform(0.0, 0.1)
        probation = int(rng.integers(0, n // 3))
        for profile in PROFILES.values():
            ours = score_series(det, windows, profile, probation=probation).raw
            theirs = nab_sweeper_score(det, [(w.start, w.end) for w in windows],
                                       profile.tp_weight, profile.fp_weight,
                                       profile.fn_weight, probation)
            assert ours == pytest.approx(theirs, abs=1e-9)
