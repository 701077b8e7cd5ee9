"""What a series should read now: a seasonal prediction, or a trailing robust baseline while
history is short.

Streaming and causal: ``expect()`` uses only the points pushed so far, then ``push(x)`` adds
the new one. The seasonal prediction is the median, over the same time 1, 2 and 3 weeks ago,
of the median of a small window around that time; it is corrected for trend by the ratio of
what the series did to what the prediction said over the last day (so a service that grew 20%
since last week is not "anomalous" all week). Its spread is the MAD of those residuals. With
less than a week of history the expectation is the median of the trailing points, its spread
their MAD. Spreads have a floor relative to the level, so a flat series (GPU memory) does
not turn every wiggle into an infinite z-score.

A baseline must not learn the anomaly it should flag: the detector pushes a point it judged
anomalous as *excluded* (``push(x, accepted=False)``). An excluded point is not among the
trailing points (the trailing baseline is the last ``trailing_points`` accepted values), so an
incident longer than the trailing window is still measured against the level before it, and
it does not count in the trend correction. The seasonal history keeps it: the median over
three weeks already outvotes one bad week, and what looked anomalous in the first week (the
first weekend) is the pattern the next weeks are judged by.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from monitor.anomaly.params import AnomalyParams

WEEK_SECONDS = 7 * 86400.0
MAD_TO_SIGMA = 1.4826  # MAD of a normal distribution x this = its standard deviation


def median(values: npt.NDArray[np.float64]) -> float:
    """``np.median`` of NaN-free values, equal to it, without its per-call overhead (the
    detectors take a few hundred thousand medians of small arrays in a replay)."""
    n = len(values)
    half = n // 2
    if n % 2:
        return float(np.partition(values, half)[half])
    part = np.partition(values, (half - 1, half))
    return float((part[half - 1] + part[half]) / 2)


def quantile(values: npt.NDArray[np.float64], q: float) -> float:
    """``np.quantile`` (linear) of NaN-free values without its per-call overhead."""
    position = q * (len(values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(values) - 1)
    part = np.partition(values, (low, high))
    a, b = float(part[low]), float(part[high])
    return a + (b - a) * (position - low)


@dataclass(frozen=True, slots=True)
class Expectation:
    expected: float
    scale: float      # robust standard deviation around ``expected``
    seasonal: bool    # from the weeks before (else the trailing baseline)


class Ring:
    """The last ``capacity`` values of a stream, NaN where none (or missing)."""

    def __init__(self, capacity: int) -> None:
        self.values: npt.NDArray[np.float64] = np.full(capacity, np.nan)
        self.count = 0

    def push(self, value: float) -> None:
        self.values[self.count % len(self.values)] = value
        self.count += 1

    def back(self, offsets: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Values ``offsets`` points before the next one (1 = the latest); NaN before the
        start."""
        out = self.values[(self.count - offsets) % len(self.values)]
        return np.where(offsets <= self.count, out, np.nan)

    def last(self, n: int) -> npt.NDArray[np.float64]:
        """The latest ``n`` values (fewer before there are ``n``), oldest first; a view where
        they are contiguous, so callers must not write into it."""
        capacity = len(self.values)
        n = min(n, self.count, capacity)
        end = self.count % capacity or (capacity if self.count else 0)
        if n <= end:
            return self.values[end - n:end]
        return np.concatenate((self.values[capacity - (n - end):], self.values[:end]))


class SeriesBaseline:
    def __init__(self, params: AnomalyParams, absolute_floor: float | None = None,
                 trailing_points: int | None = None) -> None:
        self.params = params
        self.trailing_points = trailing_points or params.trailing_points
        self.absolute_floor = (params.absolute_scale_floor if absolute_floor is None
                               else absolute_floor)
        self.season = max(1, round(WEEK_SECONDS / params.step_seconds))
        half = params.season_halfwidth_points
        self._values = Ring(self.season * params.season_lags + half + 1)
        self._trailing = Ring(self.trailing_points)  # accepted values only
        self._predictions = Ring(params.trend_points)  # raw seasonal predictions, aligned
        self._fitted = Ring(params.trend_points)  # the values the trend is fitted on
        self._window = np.arange(-half, half + 1, dtype=np.int64)
        self._next_prediction = math.nan

    @property
    def num_points(self) -> int:
        return self._values.count

    def expect(self) -> Expectation | None:
        """The expectation for the next point; None until there are ``min_points``."""
        p = self.params
        self._next_prediction = self._seasonal()
        if not math.isnan(self._next_prediction):
            fit = self._seasonal_fit(self._next_prediction)
            if fit is not None:
                return fit
        trailing = self._trailing.last(self.trailing_points)
        if len(trailing) < p.min_points:
            return None
        level = median(trailing)
        mad = median(np.abs(trailing - level))
        return Expectation(level, self._floor(level, MAD_TO_SIGMA * mad), False)

    def quantile(self, q: float, points: int) -> float:
        """The ``q`` quantile of the last ``points`` values (NaN without any)."""
        values = self._values.last(points)
        values = values[~np.isnan(values)]
        return quantile(values, q) if len(values) else math.nan

    def push(self, value: float, accepted: bool = True) -> None:
        """Add the point that ``expect()`` was asked about (NaN for a gap); ``accepted``
        False: an anomalous point, kept out of what the baseline learns."""
        if accepted and not math.isnan(value):
            self._trailing.push(value)
        self._values.push(value)
        self._fitted.push(value if accepted else math.nan)
        self._predictions.push(self._next_prediction)
        self._next_prediction = math.nan

    def _seasonal(self) -> float:
        medians = []
        for lag in range(1, self.params.season_lags + 1):
            around = self._values.back(lag * self.season + self._window)
            present = around[~np.isnan(around)]
            if len(present) > len(around) // 2:
                medians.append(median(present))
        return median(np.array(medians)) if medians else math.nan

    def _seasonal_fit(self, prediction: float) -> Expectation | None:
        """Trend-corrected prediction and the spread of its recent residuals; None until
        enough predictions were made to judge them."""
        n = min(self._predictions.count, self.params.trend_points)
        actual = self._fitted.last(n)
        predicted = self._predictions.last(n)
        both = ~np.isnan(actual) & ~np.isnan(predicted)
        if np.count_nonzero(both) < self.params.min_seasonal_points:
            return None
        actual, predicted = actual[both], predicted[both]
        base = median(predicted)
        trend = median(actual) / base if base > 0 else 1.0
        trend = min(max(trend, 0.5), 2.0) if math.isfinite(trend) else 1.0
        residuals = actual - trend * predicted
        mad = median(np.abs(residuals - median(residuals)))
        expected = trend * prediction
        return Expectation(expected, self._floor(expected, MAD_TO_SIGMA * mad), True)

    def _floor(self, level: float, scale: float) -> float:
        return max(scale, self.params.relative_scale_floor * abs(level), self.absolute_floor)
