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
from bisect import bisect_left, insort
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
    part = values.copy()
    if n % 2:
        part.partition(half)
        return float(part[half])
    part.partition((half - 1, half))
    return float((part[half - 1] + part[half]) / 2)


def _median_in_place(values: npt.NDArray[np.float64]) -> float:
    """``median`` of an array the caller owns and no longer needs (it is reordered)."""
    n = len(values)
    half = n // 2
    if n % 2:
        values.partition(half)
        return float(values[half])
    values.partition((half - 1, half))
    return float((values[half - 1] + values[half]) / 2)


def sorted_median(ordered: list[float]) -> float:
    """``median`` of an already sorted list (the same value, without a partition)."""
    n = len(ordered)
    if n % 2:
        return ordered[n // 2]
    return (ordered[n // 2 - 1] + ordered[n // 2]) / 2


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
    """The last ``capacity`` values of a stream, NaN where none (or missing).

    Stored twice over (``values`` and a copy right after it), so the latest ``n`` values are
    always one contiguous slice: ``last()`` is a view, never a copy (the detectors read a few
    windows of up to a day per step, so the copy cost more than the reading)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._data: npt.NDArray[np.float64] = np.full(2 * capacity, np.nan)
        self.values: npt.NDArray[np.float64] = self._data[:capacity]
        self.count = 0

    def push(self, value: float) -> None:
        k = self.count % self.capacity
        data = self._data
        data[k] = value
        data[k + self.capacity] = value
        self.count += 1

    def back(self, offsets: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Values ``offsets`` points before the next one (1 = the latest); NaN before the
        start."""
        out = self.values[(self.count - offsets) % self.capacity]
        return np.where(offsets <= self.count, out, np.nan)

    def last(self, n: int) -> npt.NDArray[np.float64]:
        """The latest ``n`` values (fewer before there are ``n``), oldest first; a view, so
        callers must not write into it."""
        capacity = self.capacity
        n = min(n, self.count, capacity)
        end = self.count % capacity + capacity
        return self._data[end - n:end]


class SeriesBaseline:
    def __init__(self, params: AnomalyParams, absolute_floor: float | None = None,
                 trailing_points: int | None = None, quantile_points: int = 0) -> None:
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
        # The pairs of the trend window with both values, each side kept sorted as the window
        # slides, so their medians are a lookup (equal to ``median`` of the same values).
        # ``quantile(q, quantile_points)``: the last ``quantile_points`` values, sorted
        self._quantile_points = min(quantile_points, self._values.capacity)
        self._window_sorted: list[float] = []
        self._actual_sorted: list[float] = []
        self._predicted_sorted: list[float] = []

    @property
    def num_points(self) -> int:
        return self._values.count

    def expect(self) -> Expectation | None:
        """The expectation for the next point; None until there are ``min_points``."""
        self.predict()
        return self.current()

    def predict(self) -> None:
        """The part of ``expect()`` that the baseline learns from (the prediction it records
        for the next point), for a caller that may not need the expectation itself."""
        self._next_prediction = self._seasonal()

    def current(self) -> Expectation | None:
        """The expectation for the next point, after ``predict()`` (``expect()`` does both)."""
        p = self.params
        if not math.isnan(self._next_prediction):
            fit = self._seasonal_fit(self._next_prediction)
            if fit is not None:
                return fit
        trailing = self._trailing.last(self.trailing_points)
        if len(trailing) < p.min_points:
            return None
        level = median(trailing)
        mad = _median_in_place(np.abs(trailing - level))
        return Expectation(level, self._floor(level, MAD_TO_SIGMA * mad), False)

    def quantile(self, q: float, points: int) -> float:
        """The ``q`` quantile of the last ``points`` values (NaN without any)."""
        if points == self._quantile_points:
            ordered = self._window_sorted
            if not ordered:
                return math.nan
            position = q * (len(ordered) - 1)
            low = math.floor(position)
            a, b = ordered[low], ordered[min(low + 1, len(ordered) - 1)]
            return a + (b - a) * (position - low)
        values = self._values.last(points)
        values = values[~np.isnan(values)]
        return quantile(values, q) if len(values) else math.nan

    def push(self, value: float, accepted: bool = True) -> None:
        """Add the point that ``expect()`` was asked about (NaN for a gap); ``accepted``
        False: an anomalous point, kept out of what the baseline learns."""
        if accepted and not math.isnan(value):
            self._trailing.push(value)
        if self._quantile_points:
            ring, span = self._values, self._quantile_points
            if ring.count >= span:  # the oldest value leaves the quantile's window
                leaving = float(ring.values[(ring.count - span) % ring.capacity])
                if not math.isnan(leaving):
                    _remove(self._window_sorted, leaving)
            if not math.isnan(value):
                insort(self._window_sorted, float(value))
        self._values.push(value)
        fitted, prediction = (value if accepted else math.nan), self._next_prediction
        window = self._fitted
        if window.count >= window.capacity:  # the oldest pair leaves the trend window
            k = window.count % window.capacity
            old_actual, old_prediction = window.values[k], self._predictions.values[k]
            if not (math.isnan(old_actual) or math.isnan(old_prediction)):
                _remove(self._actual_sorted, float(old_actual))
                _remove(self._predicted_sorted, float(old_prediction))
        if not (math.isnan(fitted) or math.isnan(prediction)):
            insort(self._actual_sorted, float(fitted))
            insort(self._predicted_sorted, float(prediction))
        _push_pair(window, self._predictions, fitted, prediction)
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
        count = len(self._actual_sorted)
        if count < self.params.min_seasonal_points:
            return None
        n = min(self._predictions.count, self.params.trend_points)
        actual = self._fitted.last(n)
        predicted = self._predictions.last(n)
        if count < n:
            both = ~np.isnan(actual) & ~np.isnan(predicted)
            actual, predicted = actual[both], predicted[both]
        base = sorted_median(self._predicted_sorted)
        trend = sorted_median(self._actual_sorted) / base if base > 0 else 1.0
        trend = min(max(trend, 0.5), 2.0) if math.isfinite(trend) else 1.0
        residuals = actual - trend * predicted
        mad = _median_in_place(np.abs(residuals - _median_in_place(residuals)))
        expected = trend * prediction
        return Expectation(expected, self._floor(expected, MAD_TO_SIGMA * mad), True)

    def _floor(self, level: float, scale: float) -> float:
        return max(scale, self.params.relative_scale_floor * abs(level), self.absolute_floor)


def _push_pair(first: Ring, second: Ring, a: float, b: float) -> None:
    """``first.push(a); second.push(b)`` for two rings of one capacity pushed together (the
    hottest pushes of a replay, inlined)."""
    capacity = first.capacity
    k = first.count % capacity
    first._data[k] = first._data[k + capacity] = a
    second._data[k] = second._data[k + capacity] = b
    first.count += 1
    second.count += 1


def _remove(ordered: list[float], value: float) -> None:
    del ordered[bisect_left(ordered, value)]


def _middle(ordered: npt.NDArray[np.float64], count: npt.NDArray[np.int64], axis: int
            ) -> npt.NDArray[np.float64]:
    """Per row (``axis`` 1) or column (0) of ``ordered`` (sorted, NaN last), the median of
    its first ``count`` values, as ``median`` computes it (the middle one, or the mean of the
    middle two); NaN where ``count`` is 0."""
    mid = count // 2
    low = np.maximum(mid - 1, 0)
    hi = np.take_along_axis(ordered, np.expand_dims(mid.clip(max=ordered.shape[axis] - 1),
                                                    axis), axis).squeeze(axis)
    lo = np.take_along_axis(ordered, np.expand_dims(low, axis), axis).squeeze(axis)
    out = np.where(count % 2 == 1, hi, (lo + hi) / 2)
    return np.where(count > 0, out, np.nan)


def seasonal_predictions(values: npt.NDArray[np.float64], first: int, season: int, lags: int,
                         half: int) -> npt.NDArray[np.float64]:
    """``SeriesBaseline``'s seasonal prediction for each point of ``values`` from ``first``
    on, from the points before it: the median over lags 1..``lags`` seasons back of the median
    of the present points within ``half`` of that time (where more than half are present)."""
    width = 2 * half + 1
    out_len = len(values) - first
    per_lag = np.full((lags, max(out_len, 0)), np.nan)
    pad = lags * season + half
    padded = np.concatenate((np.full(pad, np.nan), values))
    windows = np.lib.stride_tricks.sliding_window_view(padded, width)
    for lag in range(1, lags + 1):
        # point p's window is values[p - lag*season - half : p - lag*season + half + 1]
        j0 = max(0, lag * season - first)  # before: more than half of it precedes the start
        if j0 >= out_len:
            continue
        row = first + j0 + pad - lag * season - half
        block = np.sort(windows[row:row + out_len - j0], axis=1)
        count = width - np.count_nonzero(np.isnan(block), axis=1)
        per_lag[lag - 1, j0:] = np.where(count > width // 2, _middle(block, count, 1), np.nan)
    ordered = np.sort(per_lag, axis=0)
    return _middle(ordered, lags - np.count_nonzero(np.isnan(ordered), axis=0), 0)


def kernel_state(baseline: SeriesBaseline
                 ) -> tuple[tuple[npt.NDArray[np.float64], ...], npt.NDArray[np.int64]]:
    """A baseline's state as ``monitor.anomaly.compiled`` reads and writes it: the rings'
    buffers themselves (written in place), the sorted windows as arrays with room to grow,
    and the counts (``compiled.SB_*``). ``restore_kernel_state`` takes the result back."""
    def room(ordered: list[float], size: int) -> npt.NDArray[np.float64]:
        out = np.empty(max(size, len(ordered)) + 1)
        out[:len(ordered)] = ordered
        return out

    b = baseline
    arrays = (b._values._data, b._trailing._data, b._predictions._data, b._fitted._data,
              room(b._actual_sorted, b.params.trend_points),
              room(b._predicted_sorted, b.params.trend_points),
              room(b._window_sorted, b._quantile_points))
    ints = np.array([b._values.count, b._trailing.count, b._predictions.count,
                     b._fitted.count, len(b._actual_sorted), len(b._predicted_sorted),
                     len(b._window_sorted)], dtype=np.int64)
    return arrays, ints


def restore_kernel_state(baseline: SeriesBaseline,
                         arrays: tuple[npt.NDArray[np.float64], ...],
                         ints: npt.NDArray[np.int64]) -> None:
    b = baseline
    counts = ints.tolist()
    b._values.count, b._trailing.count, b._predictions.count, b._fitted.count = counts[:4]
    b._actual_sorted = arrays[4][:counts[4]].tolist()
    b._predicted_sorted = arrays[5][:counts[5]].tolist()
    b._window_sorted = arrays[6][:counts[6]].tolist()
    b._next_prediction = math.nan


def planned_predictions(baseline: SeriesBaseline, values: npt.NDArray[np.float64]
                        ) -> npt.NDArray[np.float64]:
    """The seasonal predictions ``expect()`` would record for each of ``values`` pushed in
    turn after the history (a function of the values alone, excluded ones included), at once,
    for the compiled replay."""
    history = baseline._values.last(baseline._values.capacity)
    full = np.concatenate((history, np.asarray(values, dtype=np.float64)))
    return seasonal_predictions(full, len(history), baseline.season,
                                baseline.params.season_lags,
                                baseline.params.season_halfwidth_points)
