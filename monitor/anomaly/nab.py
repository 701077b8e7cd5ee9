"""Numenta Anomaly Benchmark (NAB) scoring of streaming anomaly detectors.

Faithful to numenta/NAB (``nab/labeler.py``, ``nab/sweeper.py``, ``nab/optimizer.py``,
``config/profiles.json``); Lavin & Ahmad, "Evaluating Real-time Anomaly Detection
Algorithms - the Numenta Anomaly Benchmark", ICMLA 2015.

Windows. A series of ``n`` rows with ``k`` labelled anomaly points gets, around each
point ``a``, the window ``[a - w // 2, a + w // 2]`` with ``w = int(0.1 * n / k)``, clipped
to the data; overlapping windows are merged (:func:`windows_around`). Callers who know the
anomaly interval (injected faults) may pass their own windows.

Row scores (the sweeper). Every row gets a weighted score, as if a detection fired there:

* inside a window ``[s, e]`` of width ``W = e - s + 1``: position ``-(e - i + 1) / W``
  (-1 at the first row, just below 0 at the last) and score
  ``tp_weight * sigma(position) / sigma(-1)``, ``sigma`` being :func:`scaled_sigmoid`.
  The division by ``sigma(-1)`` is NAB's (``/ maxTP`` in the sweeper): a detection at the
  first row of a window scores exactly ``tp_weight``;
* outside windows, before any window: ``-fp_weight``;
* outside windows, after window ``[s', e']``: ``fp_weight * sigma((i - e') / (W' - 1))``, a
  penalty growing from ~0 just after the window to ``-fp_weight`` three widths later (NAB
  divides by zero for a one-row window; here the divisor is at least 1).

Series score: the sum of the scores of detections outside windows, plus, per window, the
score of its first detection (later ones count nothing), or ``-fn_weight`` if none. Rows of
the probationary period (``min(floor(0.15 n), 0.15 * 5000)`` rows, NAB's
``getProbationPeriod``) are not scored, and windows ending inside it are not counted.

Normalization over a corpus: raw, null (never detects: ``-fn_weight`` per window) and
perfect (detects at the first scorable row of each window and nowhere else) are summed over
all series, then ``100 * (raw - null) / (perfect - null)``.

Thresholds: detections are ``score >= threshold``. :func:`optimize_threshold` sweeps every
distinct score value of the corpus exactly, as NAB's ``calcScoreByThreshold`` does, in one
sort (O(N log N) for N rows).

:func:`window_metrics` gives the classic per-window view (recall, precision on alert starts,
detection delay) for reports beside the NAB score.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

WINDOW_FRACTION = 0.1
PROBATION_PERCENT = 0.15
PROBATION_CAP_ROWS = 5000  # NAB: min(floor(0.15 * n), 0.15 * 5000) -> at most 750 rows


@dataclass(frozen=True, slots=True)
class Profile:
    """An application profile of NAB's cost matrix (``config/profiles.json``)."""

    name: str
    tp_weight: float
    fp_weight: float
    fn_weight: float
    tn_weight: float = 1.0  # in NAB's profiles, unused by its scoring


PROFILES: dict[str, Profile] = {
    "standard": Profile("standard", tp_weight=1.0, fp_weight=0.11, fn_weight=1.0),
    "reward_low_fp_rate": Profile("reward_low_fp_rate", tp_weight=1.0, fp_weight=0.22,
                                  fn_weight=1.0),
    "reward_low_fn_rate": Profile("reward_low_fn_rate", tp_weight=1.0, fp_weight=0.11,
                                  fn_weight=2.0),
}
STANDARD = PROFILES["standard"]


@dataclass(frozen=True, slots=True)
class Window:
    """Rows ``start..end`` (inclusive) labelled anomalous; ``anomaly`` is the labelled
    anomaly's first row, inside the window."""

    start: int
    end: int
    anomaly: int

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.anomaly <= self.end:
            raise ValueError(
                f"window needs 0 <= start <= anomaly <= end, got start={self.start}, "
                f"anomaly={self.anomaly}, end={self.end}")

    @property
    def width(self) -> int:
        return self.end - self.start + 1


@dataclass(frozen=True, slots=True)
class SeriesScore:
    """NAB score of one series. ``tp``/``fn``: windows detected/missed; ``fp``: scored
    detections outside windows; ``null``/``perfect``: the baselines for normalization."""

    raw: float
    tp: int
    fp: int
    fn: int
    null: float
    perfect: float


@dataclass(frozen=True, slots=True)
class WindowMetrics:
    """Classic per-window metrics, counted on alert starts.

    ``delays[j]`` is the first alert start inside window j minus its anomaly start (negative:
    early, within the window), None if the window was missed. ``recall`` is NaN without
    windows, ``precision`` NaN without alerts."""

    windows: int
    detected: int
    alerts: int
    true_alerts: int
    false_alerts: int
    delays: tuple[int | None, ...]

    @property
    def recall(self) -> float:
        return self.detected / self.windows if self.windows else math.nan

    @property
    def precision(self) -> float:
        return self.true_alerts / self.alerts if self.alerts else math.nan

    @property
    def mean_delay(self) -> float | None:
        found = [d for d in self.delays if d is not None]
        return sum(found) / len(found) if found else None


def scaled_sigmoid(position: float) -> float:
    """NAB's scaled sigmoid: 2 / (1 + exp(5 x)) - 1, and -1 from x = 3 on."""
    if position >= 3.0:
        return -1.0
    return 2.0 / (1.0 + math.exp(5.0 * position)) - 1.0


MAX_TP = scaled_sigmoid(-1.0)  # ~0.98661, NAB's maxTP


def _scaled_sigmoid_array(position: FloatArray) -> FloatArray:
    exp = np.exp(5.0 * np.minimum(position, 3.0))
    return np.where(position >= 3.0, -1.0, 2.0 / (1.0 + exp) - 1.0)


def probationary_length(n: int, percent: float = PROBATION_PERCENT) -> int:
    """Rows not scored at the start of a series of n rows (NAB's ``getProbationPeriod``)."""
    return int(min(math.floor(percent * n), percent * PROBATION_CAP_ROWS))


def merge_windows(windows: Sequence[Window]) -> list[Window]:
    """Sort windows and merge those that overlap (NAB's labeler: next start <= end); a merged
    window keeps the earliest anomaly."""
    merged: list[Window] = []
    for w in sorted(windows, key=lambda w: (w.start, w.end)):
        if merged and w.start <= merged[-1].end:
            last = merged[-1]
            merged[-1] = Window(last.start, max(last.end, w.end), min(last.anomaly, w.anomaly))
        else:
            merged.append(w)
    return merged


def windows_around(n: int, anomaly_indices: Sequence[int],
                   fraction: float = WINDOW_FRACTION) -> list[Window]:
    """NAB windows for a series of n rows: width ``int(fraction * n / k)`` for k anomalies,
    centred on each anomaly index, clipped to the data, overlaps merged.

    NAB's labeler also drops a first window that starts inside the probationary period;
    this does not (place labelled anomalies after the probationary period)."""
    if n <= 0:
        raise ValueError(f"series length must be positive, got {n}")
    if not anomaly_indices:
        return []
    bad = [a for a in anomaly_indices if not 0 <= a < n]
    if bad:
        raise ValueError(f"anomaly indices {bad} outside the series' rows 0..{n - 1}")
    half = int(fraction * n / len(anomaly_indices)) // 2
    return merge_windows([Window(max(a - half, 0), min(a + half, n - 1), a)
                          for a in anomaly_indices])


def _check_windows(windows: Sequence[Window], n: int | None) -> None:
    previous: Window | None = None
    for w in windows:
        if n is not None and w.end >= n:
            raise ValueError(f"window {w} ends past the series' last row {n - 1}")
        if previous is not None and w.start <= previous.end:
            raise ValueError(f"windows must be sorted and disjoint: {previous} then {w} "
                             "(merge_windows merges them)")
        previous = w


def _detections(detections: Sequence[bool] | npt.NDArray[np.generic]) -> BoolArray:
    det = np.asarray(detections)
    if det.ndim != 1:
        raise ValueError(f"detections must be one-dimensional, got shape {det.shape}")
    return det.astype(bool)


def _sweep(n: int, windows: Sequence[Window], profile: Profile) -> tuple[FloatArray, IntArray]:
    """Weighted score of a detection at each row, and the row's window index (-1: none)."""
    rows = np.arange(n)
    starts = np.array([w.start for w in windows], dtype=np.int64)
    ends = np.array([w.end for w in windows], dtype=np.int64)
    widths = (ends - starts + 1).astype(np.float64)
    scores = np.full(n, -profile.fp_weight)  # before any window
    window_of = np.full(n, -1, dtype=np.int64)
    if not windows:
        return scores, window_of
    k = np.searchsorted(starts, rows, side="right") - 1
    inside = (k >= 0) & (rows <= ends[np.maximum(k, 0)])
    kin = k[inside]
    position = -(ends[kin] - rows[inside] + 1) / widths[kin]
    scores[inside] = profile.tp_weight * _scaled_sigmoid_array(position) / MAX_TP
    window_of[inside] = kin
    prev = np.searchsorted(ends, rows, side="left") - 1  # last window ending before the row
    after = ~inside & (prev >= 0)
    pa = prev[after]
    past = (rows[after] - ends[pa]) / np.maximum(widths[pa] - 1.0, 1.0)
    scores[after] = profile.fp_weight * _scaled_sigmoid_array(past)
    return scores, window_of


def score_series(detections: Sequence[bool] | npt.NDArray[np.generic],
                 windows: Sequence[Window], profile: Profile = STANDARD,
                 probation: int | None = None) -> SeriesScore:
    """NAB score of one series' detections (one bool per row); ``probation`` rows at the start
    are not scored (default: NAB's :func:`probationary_length`)."""
    det = _detections(detections)
    n = len(det)
    _check_windows(windows, n)
    p = probationary_length(n) if probation is None else probation
    if p < 0:
        raise ValueError(f"probation must be >= 0, got {p}")
    scores, window_of = _sweep(n, windows, profile)
    active = det & (np.arange(n) >= p)
    outside = active & (window_of < 0)
    hit_windows, first_rows = np.unique(window_of[active & (window_of >= 0)],
                                        return_index=True)
    first_hits = np.flatnonzero(active & (window_of >= 0))[first_rows]
    counted = [w for w in windows if w.end >= p]
    tp = len(hit_windows)
    fn = len(counted) - tp
    raw = float(scores[outside].sum() + scores[first_hits].sum()) - fn * profile.fn_weight
    perfect = float(sum(scores[max(w.start, p)] for w in counted))
    return SeriesScore(raw=raw, tp=tp, fp=int(outside.sum()), fn=fn,
                       null=-profile.fn_weight * len(counted), perfect=perfect)


def _normalize(raw: float, null: float, perfect: float) -> float:
    if perfect == null:
        raise ValueError("no scorable anomaly window in the corpus: the score is undefined")
    return 100.0 * (raw - null) / (perfect - null)


def normalized(scores: Sequence[SeriesScore]) -> float:
    """Corpus score: 100 * (raw - null) / (perfect - null), each summed over the series."""
    return _normalize(sum(s.raw for s in scores), sum(s.null for s in scores),
                      sum(s.perfect for s in scores))


def score_corpus(series: Sequence[tuple[npt.NDArray[np.generic], Sequence[Window]]],
                 threshold: float, profile: Profile = STANDARD,
                 probation: int | None = None) -> list[SeriesScore]:
    """Score each (anomaly scores, windows) series with detections ``score >= threshold``."""
    return [score_series(np.asarray(s, dtype=np.float64) >= threshold, w, profile, probation)
            for s, w in series]


def optimize_threshold(series: Sequence[tuple[npt.NDArray[np.generic], Sequence[Window]]],
                       profile: Profile = STANDARD,
                       probation: int | None = None) -> tuple[float, float]:
    """The threshold maximizing the corpus' raw NAB score, and its normalized score.

    Every distinct score value is tried (NAB's optimizer), plus a threshold above all scores
    (never detect); ties go to the highest threshold. One pass over the scorable rows sorted
    by descending score: a row entering the detections adds its sweep score if outside a
    window, or raises its window's contribution to the best (earliest) detection's score."""
    anomaly: list[FloatArray] = []
    sweep: list[FloatArray] = []
    group: list[IntArray] = []
    null = perfect = 0.0
    offset = 0
    for values, windows in series:
        s = np.asarray(values, dtype=np.float64)
        if s.ndim != 1:
            raise ValueError(f"anomaly scores must be one-dimensional, got shape {s.shape}")
        if np.isnan(s).any():
            raise ValueError("anomaly scores contain NaN")
        base = score_series(np.zeros(len(s), dtype=bool), windows, profile, probation)
        null += base.null
        perfect += base.perfect
        p = probationary_length(len(s)) if probation is None else probation
        row_scores, window_of = _sweep(len(s), windows, profile)
        anomaly.append(s[p:])
        sweep.append(row_scores[p:])
        group.append(np.where(window_of[p:] >= 0, window_of[p:] + offset, -1))
        offset += len(windows)
    if not anomaly or sum(len(a) for a in anomaly) == 0:
        raise ValueError("no scorable rows to optimize a threshold on")
    a, sw, g = np.concatenate(anomaly), np.concatenate(sweep), np.concatenate(group)
    order = np.argsort(-a, kind="stable")
    a, sw, g = a[order], sw[order], g[order]
    delta = np.where(g < 0, sw, 0.0)
    rows = np.flatnonzero(g >= 0)
    if len(rows):
        # Per window, the best score so far (sweep scores in a window are in [0, tp_weight]):
        # a running maximum over rows grouped by window, each group lifted above the previous.
        by_window = rows[np.argsort(g[rows], kind="stable")]
        lift = g[by_window] * (2.0 * profile.tp_weight + 2.0 * profile.fn_weight + 1.0)
        best = np.maximum.accumulate(sw[by_window] + lift) - lift
        before = np.concatenate(([-profile.fn_weight], best[:-1]))
        first = np.concatenate(([True], g[by_window][1:] != g[by_window][:-1]))
        before[first] = -profile.fn_weight
        delta[by_window] = best - before
    total = null + np.cumsum(delta)
    last_of_value = np.concatenate((a[1:] != a[:-1], [True]))
    candidates = np.concatenate(([null], total[last_of_value]))
    thresholds = np.concatenate(([np.nextafter(a[0], np.inf)], a[last_of_value]))
    i = int(np.argmax(candidates))
    return float(thresholds[i]), _normalize(float(candidates[i]), null, perfect)


def random_scores(n: int, seed: int = 0) -> FloatArray:
    """NAB's "random" baseline: uniform scores in [0, 1), seeded (use with
    :func:`optimize_threshold`)."""
    return np.random.default_rng(seed).random(n)


def alert_starts(firing: Sequence[bool] | npt.NDArray[np.generic]) -> IntArray:
    """Rows where an alert starts: firing, and not firing the row before."""
    f = _detections(firing)
    return np.flatnonzero(f & ~np.concatenate(([False], f[:-1]))).astype(np.int64)


def window_metrics(alerts: Sequence[bool] | Sequence[int] | npt.NDArray[np.generic],
                   windows: Sequence[Window], *, n: int | None = None,
                   anomaly_starts: Sequence[int] | None = None,
                   probation: int = 0) -> WindowMetrics:
    """Per-window recall, precision and delay, counted on alert starts.

    ``alerts``: a bool per row (alert firing; its starts are used), or the row indices where
    alerts start. A window is detected when an alert starts inside it; alert starts outside
    every window are false alerts; starts before row ``probation`` are ignored. Delays are
    measured from ``anomaly_starts`` (default: each window's ``anomaly``)."""
    arr = np.asarray(alerts)
    if arr.dtype == np.bool_:
        if n is not None and n != len(arr):
            raise ValueError(f"{len(arr)} alert flags for a series of {n} rows")
        n = len(arr)
        starts = alert_starts(arr)
    else:
        if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
            raise ValueError("alerts must be bools per row or integer alert-start indices")
        starts = np.unique(arr.astype(np.int64))
        if starts.size and (starts[0] < 0 or (n is not None and starts[-1] >= n)):
            raise ValueError(f"alert starts outside the series' rows: {starts.tolist()}")
    _check_windows(windows, n)
    if anomaly_starts is None:
        anomaly_starts = [w.anomaly for w in windows]
    elif len(anomaly_starts) != len(windows):
        raise ValueError(f"{len(anomaly_starts)} anomaly starts for {len(windows)} windows")
    starts = starts[starts >= probation]
    delays: list[int | None] = []
    inside = 0
    for w, anomaly in zip(windows, anomaly_starts):
        hits = starts[(starts >= w.start) & (starts <= w.end)]
        inside += len(hits)
        delays.append(int(hits[0]) - anomaly if len(hits) else None)
    return WindowMetrics(windows=len(windows), detected=sum(d is not None for d in delays),
                         alerts=len(starts), true_alerts=inside,
                         false_alerts=len(starts) - inside, delays=tuple(delays))
