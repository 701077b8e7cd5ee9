"""Streaming thresholds from extreme-value theory: SPOT (Siffer et al., "Anomaly Detection in
Streams with Extreme Value Theory", KDD 2017), for a target false-alarm probability rather
than a fixed z.

A feature stream (a deviation, larger is stranger) is calibrated on its first ``init_points``
values: the ``init_level`` quantile of them is the peak threshold ``t``, and the excesses over
``t`` (the peaks) are fitted with a generalized Pareto distribution (GPD). The alarm threshold
is the value exceeded with probability ``risk`` per point,

    z_q = t + sigma / xi * ((risk * n / N_t) ** -xi - 1)        (t - sigma * log(...) at xi = 0)

with ``n`` the values seen and ``N_t`` the peaks among them. Afterwards each value above
``z_q`` is an alarm; each value above ``t`` is a new peak, and the GPD is refitted on the
peaks (the last ``max_peaks``), so the threshold follows the stream's own
tail, and never under ``minimum`` (a prior: for deviations in robust sigmas, a few sigmas).
Set ``risk`` from the false alerts an operator accepts: about ``alerts_per_week /
points_per_week``.

The GPD is fitted by probability-weighted moments (Hosking and Wallis 1987): closed form,
no iteration to diverge on a handful of peaks, and robust for the heavy tails that operations
series have. The shape is clipped to ``[0, 0.9]``: at least an exponential tail. Deviations of
operations series are not bounded, though their peaks often look so (a rounded or quantized
gauge, a few weeks of history); a bounded fit puts the threshold at the largest value seen,
and on incident-free series of two corpora alerted two to three times as often as asked
(bench.anomaly_generalise).

The score of a value is its tail probability ``p`` on a log scale, ``log p / (log p + log
risk)``: 0 at and below ``t``, 0.5 at ``z_q``, towards 1 for values ever rarer.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

XI_MIN, XI_MAX = 0.0, 0.9
BELOW = 0.499  # the score of a value under the threshold that the GPD alone would pass


@dataclass(frozen=True, slots=True)
class Gpd:
    sigma: float
    xi: float


def fit_gpd(excesses: np.ndarray) -> Gpd:
    """A GPD fitted to positive excesses by probability-weighted moments."""
    y = np.sort(np.asarray(excesses, dtype=np.float64))
    k = len(y)
    a0 = float(y.mean())
    if k < 3 or not a0 > 0:
        return Gpd(max(a0, 1e-12), 0.0)
    weights = 1.0 - (np.arange(1, k + 1) - 0.35) / k
    a1 = float((weights * y).mean())
    denominator = a0 - 2.0 * a1
    if not denominator > 0:
        return Gpd(a0, 0.0)
    xi = min(max(2.0 - a0 / denominator, XI_MIN), XI_MAX)
    # sigma from the mean of the excesses, a0 = sigma / (1 - xi), after the clip
    return Gpd(a0 * (1.0 - xi), xi)


def quantile_above(t: float, gpd: Gpd, ratio: float) -> float:
    """The value exceeded with probability ``ratio * N_t / n``: ``t`` plus the GPD's
    quantile of exceedance probability ``ratio`` (``risk * n / N_t``)."""
    if ratio >= 1.0:
        return t
    if abs(gpd.xi) < 1e-9:
        return t - gpd.sigma * math.log(ratio)
    return t + gpd.sigma / gpd.xi * (float(ratio ** -gpd.xi) - 1.0)


def tail_probability(x: float, t: float, gpd: Gpd, peak_share: float) -> float:
    """P(X > x) for x above ``t``: the share of peaks times the GPD's survival."""
    excess = x - t
    if gpd.sigma <= 0:
        return 0.0
    if abs(gpd.xi) < 1e-9:
        return peak_share * math.exp(-excess / gpd.sigma)
    base = 1.0 + gpd.xi * excess / gpd.sigma
    if base <= 0:
        return 0.0  # beyond a bounded tail's end
    return peak_share * float(base ** (-1.0 / gpd.xi))


class Spot:
    """One feature stream's threshold. ``update`` returns the value's score (0.5 at the
    alarm threshold) and whether it is an alarm; nothing is an alarm during calibration."""

    def __init__(self, risk: float, init_points: int = 1000, init_level: float = 0.98,
                 max_peaks: int = 2000, minimum: float = 0.0) -> None:
        if not 0 < risk < 1 - init_level:
            raise ValueError(f"need 0 < risk < {1 - init_level:g}, got {risk}")
        self.risk = risk
        self.minimum = minimum
        self.init_points = init_points
        self.init_level = init_level
        self._calibration: list[float] = []
        self._peaks: deque[float] = deque(maxlen=max_peaks)
        self.n = 0
        self.peak_count = 0
        self.t = math.nan
        self.z = math.inf
        self.gpd = Gpd(1.0, 0.0)

    @property
    def calibrated(self) -> bool:
        return math.isfinite(self.t)

    def update(self, x: float, learn: bool = True) -> tuple[float, bool]:
        """One value (NaN: a gap, neither scored nor learned). ``learn=False`` scores without
        learning (the point of an ongoing anomaly)."""
        if math.isnan(x):
            return 0.0, False
        if not self.calibrated:
            self._calibration.append(x)
            if len(self._calibration) >= self.init_points:
                self._calibrate()
            return 0.0, False
        score = self.score(x)
        alarm = x > self.z
        if not alarm and score >= 0.5:  # above the GPD's quantile, under the minimum
            score = BELOW
        # Alarms are learned too: leaving them out cuts the peaks at the threshold, and a fit
        # to cut peaks sees a bounded tail and lowers the threshold, point after point. The
        # caller leaves out the points of an ongoing anomaly (``learn=False``).
        if learn:
            self.n += 1
            if x > self.t:
                self._peaks.append(x - self.t)
                self.peak_count += 1
                self._refit()
        return score, alarm

    def score(self, x: float) -> float:
        if not x > self.t:
            return 0.0
        p = tail_probability(x, self.t, self.gpd, self.peak_count / self.n)
        if p <= 0:
            return 1.0
        log_p, log_risk = math.log(min(p, 1.0)), math.log(self.risk)
        return log_p / (log_p + log_risk) if log_p + log_risk < 0 else 0.0

    def _calibrate(self) -> None:
        values = np.asarray(self._calibration)
        self._calibration = []
        self.t = float(np.quantile(values, self.init_level))
        excesses = values[values > self.t] - self.t
        self.n = len(values)
        self._peaks.extend(excesses.tolist())
        self.peak_count = len(excesses)
        self._refit()

    def _refit(self) -> None:
        if self.peak_count == 0:
            # A stream constant at its quantile: anything above it (and the minimum) alarms.
            self.gpd, self.z = Gpd(0.0, 0.0), max(self.t, self.minimum)
            return
        self.gpd = fit_gpd(np.fromiter(self._peaks, dtype=np.float64))
        self.z = max(quantile_above(self.t, self.gpd, self.risk * self.n / self.peak_count),
                     self.minimum)
