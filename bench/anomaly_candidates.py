"""Candidate streaming detectors, side by side, on the labelled corpora (bench.anomaly_corpora).

Each candidate turns one series' points (on the timeline's steps, NaN for gaps) into a score
per point (0.5 at its alert threshold) and whether an alert is active there. Every candidate is
causal (no look-ahead): what it decides at a point uses the points before it and that point.

Candidates (``CANDIDATES``):
- ``current``: the product's detector as shipped before this comparison (robust z with fixed
  thresholds and tail calibration), its own alerts;
- ``spot``: the same detector's z-scores, at one, six and thirty-six points' averages, each
  thresholded by SPOT (``monitor.anomaly.evt``) at a false-alert rate per week;
- ``hst``: river's HalfSpaceTrees over the last eight points, min-max scaled online, then SPOT;
- ``iforest``: scikit-learn's IsolationForest on the last eight points and their differences,
  fitted on the learning period, then SPOT;
- ``discord``: stumpy's left matrix profile (the distance of the last hour's shape to its
  nearest earlier match, a discord), then SPOT.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from monitor.anomaly.detectors import Direction, RobustDetector
from monitor.anomaly.calibrated import LEARN_SHARE, Alerting, CalibratedParams
from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.series import SeriesScorer

Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Output:
    score: Floats
    active: Bools


@dataclass(frozen=True, slots=True)
class Setting:
    """What a candidate is tuned on: the false alerts per week its thresholds aim for and how
    many points it learns from before it alerts."""

    alerts_per_week: float = 1.0
    init_points: int = 1000
    clear_points: int = 5
    cooldown_seconds: float = 6 * 3600.0   # no new alert this long after one ends
    relative_floor: float = 0.05            # calibrated: a spread's floor, share of the level


def current(values: Floats, step: float, setting: Setting) -> Output:
    del setting
    replayed = SeriesScorer(AnomalyParams(step_seconds=step)).robust.replay(values)
    return Output(replayed.score, replayed.active)


def z_scores(values: Floats, step: float) -> Floats:
    detector = RobustDetector(AnomalyParams(step_seconds=step), Direction.BOTH)
    return np.abs(detector.replay(values).z)


def rolling_mean(x: Floats, k: int) -> Floats:
    mean: Floats = pd.Series(x).rolling(k, min_periods=max(1, k // 2)).mean().to_numpy()
    return mean


def spot_alerts(features: list[Floats], step: float, setting: Setting) -> Output:
    """Alerts from several feature streams, each with its own SPOT threshold at an equal share
    of the false-alert rate: the shipped detector's alerting (``calibrated.Alerting``), with no
    minimum threshold, since these features are not all in robust sigmas."""
    params = CalibratedParams(alerts_per_week=setting.alerts_per_week,
                              cooldown_seconds=setting.cooldown_seconds,
                              clear_points=setting.clear_points,
                              init_points=setting.init_points, minimum_sigmas=0.0)
    n = len(features[0])
    alerting = Alerting(params, step, len(features), expected_points=n)
    score = np.zeros(n)
    active = np.zeros(n, dtype=bool)
    for i, row in enumerate(np.column_stack(features).tolist()):
        score[i], active[i] = alerting.update(row)
    return Output(score, active)


def spot(values: Floats, step: float, setting: Setting) -> Output:
    z = z_scores(values, step)
    return spot_alerts([z, rolling_mean(z, 6), rolling_mean(z, 36)], step, setting)


def _lagged(values: Floats, lags: int) -> Floats:
    """Rows of the last ``lags`` points (forward-filled over gaps; leading gaps as the first
    value)."""
    filled = pd.Series(values).ffill().bfill().to_numpy()
    out = np.empty((len(filled), lags))
    for k in range(lags):
        out[:, k] = np.concatenate((np.full(k, filled[0]), filled[:len(filled) - k]))
    return out


def hst(values: Floats, step: float, setting: Setting) -> Output:
    from river import anomaly, preprocessing

    model = preprocessing.MinMaxScaler() | anomaly.HalfSpaceTrees(
        n_trees=25, height=8, window_size=250, seed=0)
    rows = _lagged(values, 8)
    raw = np.zeros(len(rows))
    for i, row in enumerate(rows.tolist()):
        x = {str(k): v for k, v in enumerate(row)}
        raw[i] = model.score_one(x)
        model.learn_one(x)
    return spot_alerts([raw], step, setting)


def iforest(values: Floats, step: float, setting: Setting) -> Output:
    from sklearn.ensemble import IsolationForest

    rows = _lagged(values, 8)
    rows = np.hstack((rows, np.diff(rows, axis=1)))
    init = min(setting.init_points, max(50, int(len(rows) * LEARN_SHARE)))
    model = IsolationForest(n_estimators=100, random_state=0).fit(rows[:init])
    raw = -model.score_samples(rows)
    return spot_alerts([raw], step, setting)


def discord(values: Floats, step: float, setting: Setting) -> Output:
    import stumpy

    m = max(4, min(60, round(3600.0 / step)))
    filled = pd.Series(values).interpolate(limit_direction="both").to_numpy()
    if len(filled) < 4 * m:
        return spot_alerts([np.zeros(len(filled))], step, setting)
    profile = stumpy.stump(filled, m)
    left = profile[:, 2].astype(np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(filled, m)
    mu = windows.mean(axis=1, keepdims=True)
    sd = windows.std(axis=1, keepdims=True)
    sd[sd < 1e-12] = 1e-12
    normed = (windows - mu) / sd
    distance = np.full(len(windows), math.nan)
    ok = left >= 0
    distance[ok] = np.linalg.norm(normed[ok] - normed[left[ok]], axis=1)
    # The subsequence ending at point i starts at i - m + 1.
    raw = np.concatenate((np.full(m - 1, math.nan), distance))
    return spot_alerts([raw], step, setting)


CANDIDATES: dict[str, Callable[[Floats, float, Setting], Output]] = {
    "current": current, "spot": spot, "hst": hst, "iforest": iforest, "discord": discord,
}


def level_features(values: Floats, step: float) -> list[Floats]:
    """Deviations of the last point and of the last few points' median from the median of
    the day before them, in robust spreads (MAD) of that day: spikes and level shifts, each
    free of any model of the series."""
    x = pd.Series(values)
    day = int(max(30, min(1440, round(86400.0 / step))))
    out = []
    for k in (1, 6, 36):
        recent = x.rolling(k, min_periods=max(1, k // 2)).median()
        before = x.shift(k)
        level = before.rolling(day, min_periods=30).median()
        spread = (before - level).abs().rolling(day, min_periods=30).median() * 1.4826
        floor = 0.05 * level.abs().rolling(day, min_periods=30).median() + 1e-9
        spread = np.maximum(spread, floor)
        out.append(((recent - level).abs() / spread).to_numpy())
    return out


def shift(values: Floats, step: float, setting: Setting) -> Output:
    return spot_alerts(level_features(values, step), step, setting)


def spot_shift(values: Floats, step: float, setting: Setting) -> Output:
    z = z_scores(values, step)
    return spot_alerts([z, rolling_mean(z, 6), *level_features(values, step)[1:]], step,
                       setting)


CANDIDATES.update({"shift": shift, "spot_shift": spot_shift})


def calibrated(values: Floats, step: float, setting: Setting) -> Output:
    """The shipped detector (``monitor.anomaly.calibrated``), as `inferwatch anomaly score`
    runs it."""
    from monitor.anomaly.calibrated import CalibratedDetector, CalibratedParams

    detector = CalibratedDetector(
        AnomalyParams(step_seconds=step), Direction.BOTH,
        CalibratedParams(alerts_per_week=setting.alerts_per_week,
                         cooldown_seconds=setting.cooldown_seconds,
                         clear_points=setting.clear_points, init_points=setting.init_points,
                         relative_floor=setting.relative_floor),
        expected_points=len(values))
    out = detector.replay(values)
    return Output(out.score, out.active)


CANDIDATES["calibrated"] = calibrated
