"""The detectors' step recurrence compiled (numba), for a replay of history.

A restart replays weeks of steps per target, and ``inferwatch anomaly score`` a whole file.
Each step of a ``RobustDetector`` or ``RatioDetector`` depends on the alerts of the steps before
(which points its baselines skipped), so the replay cannot be vectorised; in CPython each step
cost about 25 us per detector, a 22-day target 8 s. These kernels run the same recurrence,
operation for operation, on the detectors' own state arrays (``Ring`` buffers are passed as
they are; counters, sorted windows and hysteresis windows go in and out through
``monitor.anomaly.detectors``' ``replay`` methods), so a replay leaves every detector exactly
as the step path would, and its readings are equal, value for value
(``tests/monitor/anomaly/test_replay.py``). The Python ``update`` stays the reference and the
live path, and the replay's fallback where numba is not installed (``AVAILABLE``).

What keeps the values equal: the same float64 operations in the same order (no fastmath, so
no reassociation or fused multiply-adds); medians and quantiles as order statistics (whichever
way they are found, the middle values are the same numbers); the load-curve logs taken by the
caller with ``math.log``; the seasonal predictions computed by the caller
(``baseline.planned_predictions``, vectorised: a function of the values alone).

What makes it fast, besides being compiled: windows read every step are kept sorted as they
slide rather than selected again (the trailing window; the trend fit's residuals, re-sorted
by insertion from the previous step's order; the load curve's points by load, where the k
nearest are a run found by a two-way merge), and a MAD is read from two sorted runs by
bisection. ``new_cache``/``new_curve_cache`` derive those orders from the state at the start
of a replay; they are not part of the detectors' state.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

try:
    from numba import njit

    AVAILABLE = True
except ImportError:  # a Python numba has no wheel for yet: the detectors replay step by step
    AVAILABLE = False

    def njit(*args: Any, **kwargs: Any) -> Callable[[Any], Any]:  # type: ignore[no-redef]
        return lambda function: function

# Integer state of a SeriesBaseline (``_sb`` arrays): ring counts and sorted-window lengths
SB_VALUES, SB_TRAILING, SB_PREDICTIONS, SB_FITTED, SB_ACTUAL, SB_PREDICTED, SB_WINDOW = range(7)

# Integer state of a Hysteresis: recent-window length, clears, extremes, active
HY_LEN, HY_CLEARS, HY_EXTREMES, HY_ACTIVE = range(4)

# Kinds of expectation (detectors._KINDS, in this order): trailing, seasonal, load
KIND_TRAILING, KIND_SEASONAL, KIND_LOAD = 0, 1, 2

# Direction codes (``detectors.Direction``'s values)
UP, DOWN, BOTH = 0, 1, 2
DIRECTIONS = {"up": UP, "down": DOWN, "both": BOTH}

_SPREAD_NORMAL = 0.62  # as detectors._SPREAD_NORMAL


# ---------------------------------------------------------------- order statistics


@njit(cache=True)
def _select(a, n, k):
    """Reorder ``a[:n]`` so ``a[k]`` is its k-th smallest, smaller ones before it and larger
    after (NaN-free values)."""
    lo, hi = 0, n - 1
    while hi > lo:
        mid = (lo + hi) >> 1
        # median of three as the pivot
        if a[mid] < a[lo]:
            a[mid], a[lo] = a[lo], a[mid]
        if a[hi] < a[lo]:
            a[hi], a[lo] = a[lo], a[hi]
        if a[hi] < a[mid]:
            a[hi], a[mid] = a[mid], a[hi]
        pivot = a[mid]
        i, j = lo, hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while pivot < a[j]:
                j -= 1
            if i <= j:
                a[i], a[j] = a[j], a[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            return
    return


@njit(cache=True)
def _median_of(a, n):
    """The median of ``a[:n]`` (reordered), as ``baseline.median``."""
    half = n // 2
    _select(a, n, half)
    if n % 2:
        return a[half]
    lower = a[0]
    for i in range(1, half):
        if a[i] > lower:
            lower = a[i]
    return (lower + a[half]) / 2


@njit(cache=True)
def _order(a, n, k):
    """The k-th smallest of ``a[:n]`` (reordered)."""
    _select(a, n, k)
    return a[k]


@njit(cache=True)
def _sorted_median(s, n):
    if n % 2:
        return s[n // 2]
    return (s[n // 2 - 1] + s[n // 2]) / 2


@njit(cache=True)
def _insort(s, n, value):
    """``bisect.insort`` into the sorted ``s[:n]`` (room for one more)."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) >> 1
        if value < s[mid]:
            hi = mid
        else:
            lo = mid + 1
    for i in range(n, lo, -1):
        s[i] = s[i - 1]
    s[lo] = value


@njit(cache=True)
def _remove(s, n, value):
    """Delete the first ``value`` from the sorted ``s[:n]`` (``bisect_left``)."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) >> 1
        if s[mid] < value:
            lo = mid + 1
        else:
            hi = mid
    for i in range(lo, n - 1):
        s[i] = s[i + 1]


# ---------------------------------------------------------------- rings


@njit(cache=True)
def _push(data, counts, which, value):
    capacity = len(data) // 2
    k = counts[which] % capacity
    data[k] = value
    data[k + capacity] = value
    counts[which] += 1


@njit(cache=True)
def _last_bounds(data, count, n):
    capacity = len(data) // 2
    n = min(n, count, capacity)
    end = count % capacity + capacity
    return end - n, end


# ---------------------------------------------------------------- SeriesBaseline


@njit(cache=True)
def _floor(level, scale, rel_floor, abs_floor):
    return max(scale, rel_floor * abs(level), abs_floor)


@njit(cache=True)
def new_cache(sb, ints, trend_points):
    """A baseline's working orders for a replay, derived from its state (so not part of it):
    the seasonal fit's pairs by residual (built on first use, ``_residuals_sorted``) and the
    trailing values sorted (``meta[2]`` of them), kept as the ring slides."""
    trailing = sb[1]
    t0, t1 = _last_bounds(trailing, ints[SB_TRAILING], len(trailing) // 2)
    ordered = np.empty(len(trailing) // 2 + 1)
    ordered[:t1 - t0] = np.sort(trailing[t0:t1])
    meta = np.zeros(3, np.int64)
    meta[2] = t1 - t0
    return (np.empty(trend_points + 1, np.int64), np.empty(trend_points + 1), meta, ordered)


@njit(cache=True)
def _residuals_sorted(sb, ints, trend, trend_points, cache):
    """The trend fit's residuals (``actual - trend * predicted`` over the window's pairs with
    both values), sorted, in ``cache[1][:m]``; returns m. The pairs' order by residual is
    kept from the previous step (``cache[0]``: their push indices): the trend moves a little
    each step, one pair leaves and one comes, so an insertion sort does it in about linear
    time (a full sort when it would not)."""
    fitted, predictions = sb[3], sb[2]
    order, rs, meta, _ = cache
    capacity = len(fitted) // 2
    count = ints[SB_PREDICTIONS]
    start = count - min(count, trend_points)
    m = 0
    for i in range(meta[0]):  # the pairs that left the window
        if order[i] >= start:
            order[m] = order[i]
            m += 1
    end = count % capacity + capacity  # the doubled ring: the push index c is at end - count + c
    at = end - count
    for c in range(max(meta[1], start), count):  # the pairs that came
        k = at + c
        if not (math.isnan(fitted[k]) or math.isnan(predictions[k])):
            order[m] = c
            m += 1
    meta[0], meta[1] = m, count
    for i in range(m):
        k = at + order[i]
        rs[i] = fitted[k] - trend * predictions[k]
    budget = 8 * m
    for i in range(1, m):
        v, o = rs[i], order[i]
        j = i - 1
        while j >= 0 and rs[j] > v:
            rs[j + 1] = rs[j]
            order[j + 1] = order[j]
            j -= 1
        rs[j + 1] = v
        order[j + 1] = o
        budget -= i - 1 - j
        if budget < 0:
            index = np.argsort(rs[:m])
            order[:m] = order[:m][index]
            rs[:m] = rs[:m][index]
            break
    return m


@njit(cache=True)
def _distance_kth(rs, m, split, center, k):
    """The k-th smallest (0-based) of ``abs(rs[:m] - center)`` for ``rs`` sorted, ``split``
    the first index with ``rs >= center``: the k-th of two sorted runs (left of the split
    going down, right going up), by bisection."""
    na, nb = split, m - split
    lo, hi = max(0, k + 1 - nb), min(k + 1, na)
    while True:
        i = (lo + hi) >> 1  # taken from the left run
        j = k + 1 - i
        a_before = center - rs[split - i] if i > 0 else -np.inf   # A[i-1]
        b_at = rs[split + j] - center if j < nb else np.inf       # B[j]
        if i > 0 and a_before > b_at:
            hi = i - 1
            continue
        b_before = rs[split + j - 1] - center if j > 0 else -np.inf  # B[j-1]
        a_at = center - rs[split - i - 1] if i < na else np.inf      # A[i]
        if j > 0 and b_before > a_at:
            lo = i + 1
            continue
        return a_before if a_before > b_before else b_before


@njit(cache=True)
def _sb_current(sb, ints, prediction, min_points, min_seasonal, trend_points, rel_floor,
                abs_floor, cache):
    """``SeriesBaseline.current()`` with ``prediction`` the recorded one: (found, expected,
    scale, seasonal)."""
    values, trailing, predictions, fitted, actual_s, predicted_s, window_s = sb
    if not math.isnan(prediction):
        count = ints[SB_ACTUAL]
        if count >= min_seasonal:
            base = _sorted_median(predicted_s, ints[SB_PREDICTED])
            trend = (_sorted_median(actual_s, count) / base) if base > 0 else 1.0
            if math.isfinite(trend):
                trend = min(max(trend, 0.5), 2.0)
            else:
                trend = 1.0
            m = _residuals_sorted(sb, ints, trend, trend_points, cache)
            rs = cache[1]
            mad = _sorted_mad(rs, m, _sorted_median(rs, m))
            expected = trend * prediction
            return True, expected, _floor(expected, 1.4826 * mad, rel_floor, abs_floor), True
    ordered = cache[3]
    n = cache[2][2]  # the whole trailing ring: its capacity is ``trailing_points``
    if n < min_points:
        return False, math.nan, math.nan, False
    level = _sorted_median(ordered, n)
    return True, level, _floor(level, 1.4826 * _sorted_mad(ordered, n, level), rel_floor,
                               abs_floor), False


@njit(cache=True)
def _sorted_mad(ordered, n, center):
    """The median of ``abs(ordered[:n] - center)`` for ``ordered`` sorted."""
    lo, hi = 0, n
    while lo < hi:  # the first value >= center
        mid = (lo + hi) >> 1
        if ordered[mid] < center:
            lo = mid + 1
        else:
            hi = mid
    mad = _distance_kth(ordered, n, lo, center, n // 2)
    if n % 2 == 0:
        mad = (_distance_kth(ordered, n, lo, center, n // 2 - 1) + mad) / 2
    return mad


@njit(cache=True)
def _sb_push(sb, ints, value, accepted, prediction, quantile_points, cache
             ):
    """``SeriesBaseline.push(value, accepted)`` with ``prediction`` the recorded one."""
    values, trailing, predictions, fitted, actual_s, predicted_s, window_s = sb
    if accepted and not math.isnan(value):
        ordered, meta = cache[3], cache[2]
        capacity = len(trailing) // 2
        if ints[SB_TRAILING] >= capacity:  # the oldest leaves the trailing window
            _remove(ordered, meta[2], trailing[ints[SB_TRAILING] % capacity])
            meta[2] -= 1
        _insort(ordered, meta[2], value)
        meta[2] += 1
        _push(trailing, ints, SB_TRAILING, value)
    if quantile_points:
        capacity = len(values) // 2
        if ints[SB_VALUES] >= quantile_points:
            leaving = values[(ints[SB_VALUES] - quantile_points) % capacity]
            if not math.isnan(leaving):
                _remove(window_s, ints[SB_WINDOW], leaving)
                ints[SB_WINDOW] -= 1
        if not math.isnan(value):
            _insort(window_s, ints[SB_WINDOW], value)
            ints[SB_WINDOW] += 1
    _push(values, ints, SB_VALUES, value)
    fit_value = value if accepted else math.nan
    capacity = len(fitted) // 2
    if ints[SB_FITTED] >= capacity:
        k = ints[SB_FITTED] % capacity
        old_actual, old_prediction = fitted[k], predictions[k]
        if not (math.isnan(old_actual) or math.isnan(old_prediction)):
            _remove(actual_s, ints[SB_ACTUAL], old_actual)
            ints[SB_ACTUAL] -= 1
            _remove(predicted_s, ints[SB_PREDICTED], old_prediction)
            ints[SB_PREDICTED] -= 1
    if not (math.isnan(fit_value) or math.isnan(prediction)):
        _insort(actual_s, ints[SB_ACTUAL], fit_value)
        ints[SB_ACTUAL] += 1
        _insort(predicted_s, ints[SB_PREDICTED], prediction)
        ints[SB_PREDICTED] += 1
    _push(fitted, ints, SB_FITTED, fit_value)
    _push(predictions, ints, SB_PREDICTIONS, prediction)


@njit(cache=True)
def _sb_quantile(window_s, n, q):
    """``SeriesBaseline.quantile`` over its sorted window."""
    if n == 0:
        return math.nan
    position = q * (n - 1)
    low = math.floor(position)
    a = window_s[low]
    b = window_s[min(low + 1, n - 1)]
    return a + (b - a) * (position - low)


# ---------------------------------------------------------------- Hysteresis, tails


@njit(cache=True)
def _hy_update(recent, hy, breach, clear, extreme, for_points, required, clear_points,
               extreme_points):
    """``Hysteresis.update``; ``recent[:hy[HY_LEN]]`` is its window, oldest first."""
    n = hy[HY_LEN]
    if n == for_points:
        for i in range(n - 1):
            recent[i] = recent[i + 1]
        recent[n - 1] = breach
    else:
        recent[n] = breach
        hy[HY_LEN] = n + 1
    hy[HY_CLEARS] = hy[HY_CLEARS] + 1 if clear else 0
    hy[HY_EXTREMES] = hy[HY_EXTREMES] + 1 if extreme else 0
    if not hy[HY_ACTIVE]:
        breaches = 0
        for i in range(hy[HY_LEN]):
            breaches += recent[i]
        if hy[HY_EXTREMES] >= extreme_points or (breach and breaches >= required):
            hy[HY_ACTIVE] = 1
            hy[HY_CLEARS] = 0
            return True
    elif hy[HY_CLEARS] >= clear_points:
        hy[HY_ACTIVE] = 0
        hy[HY_LEN] = 0
    return False


_GUESS_MARGIN = 256  # ranks below the quantile kept as the next refresh's threshold


@njit(cache=True)
def _tail_quantile(data, d0, n, q, work, guesses, slot):
    """``baseline.quantile(data[d0:d0+n], q)`` for a high ``q``, as ``np.partition`` gives it
    (NaN sorted last). The window moves by a refresh's points between calls, so the values
    past the last call's threshold (``guesses[slot]``, set ``_GUESS_MARGIN`` ranks below the
    quantile) hold it: one predictable pass gathers them and the selection runs on those few
    hundred; a full selection where they would not hold it (the first call, a jump)."""
    position = q * (n - 1)
    low = math.floor(position)
    high = min(low + 1, n - 1)
    guess = guesses[slot]
    nans = 0
    m = 0
    if not math.isnan(guess):
        for i in range(n):
            x = data[d0 + i]
            if x != x:
                nans += 1
            elif x >= guess:
                work[m] = x
                m += 1
    finite = n - nans
    offset = finite - m  # finite values under the threshold, all below the gathered ones
    if math.isnan(guess) or low < offset:
        nans = 0
        m = 0
        for i in range(n):
            x = data[d0 + i]
            if x != x:
                nans += 1
            else:
                work[m] = x
                m += 1
        finite = m
        offset = 0
    if low >= finite:
        return math.nan
    _select(work, m, low - offset)
    a = work[low - offset]
    b = a
    if high > low:
        if high >= finite:
            return math.nan
        b = work[low - offset + 1]
        for i in range(low - offset + 2, m):
            if work[i] < b:
                b = work[i]
    under = max(low - _GUESS_MARGIN, offset) - offset
    guesses[slot] = _order(work, low - offset, under) if under < low - offset else a
    return a + (b - a) * (position - low)


@njit(cache=True)
def _tail_push(data, ints, slot, factors, bad, reference, refresh, min_points, q, work,
               guesses):
    """``TailCalibration.push``: ``ints[2*slot]`` the ring's count, ``ints[2*slot+1]`` the
    points since the refresh, ``factors[slot]`` the factor."""
    _push(data, ints, 2 * slot, 0.0 if 0.0 > bad else bad)
    ints[2 * slot + 1] += 1
    if ints[2 * slot + 1] >= refresh and ints[2 * slot] >= min_points:
        ints[2 * slot + 1] = 0
        d0, d1 = _last_bounds(data, ints[2 * slot], len(data) // 2)
        tail = _tail_quantile(data, d0, d1 - d0, q, work, guesses, slot)
        ratio = tail / reference
        factors[slot] = ratio if ratio > 1.0 else 1.0


@njit(cache=True)
def _squash(deviation, threshold):
    if not deviation > 0:
        return 0.0
    return deviation * deviation / (deviation * deviation + threshold * threshold)


# ---------------------------------------------------------------- LoadCurve


@njit(cache=True)
def new_curve_cache(log_ring, value_ring, count):
    """The load curve's points sorted by (log load, push index), kept as its rings slide:
    (log loads, values, push indices, [count])."""
    capacity = len(log_ring) // 2
    l0, l1 = _last_bounds(log_ring, count, capacity)
    v0, _ = _last_bounds(value_ring, count, capacity)
    n = l1 - l0
    index = np.argsort(log_ring[l0:l1], kind="mergesort")  # stable: ties oldest first
    loads, values = np.empty(capacity + 1), np.empty(capacity + 1)
    pushed = np.empty(capacity + 1, np.int64)
    for i in range(n):
        loads[i] = log_ring[l0 + index[i]]
        values[i] = value_ring[v0 + index[i]]
        pushed[i] = count - n + index[i]
    meta = np.zeros(1, np.int64)
    meta[0] = n
    return loads, values, pushed, meta


@njit(cache=True)
def _curve_push(log_ring, value_ring, curve_ints, cc, log_load, value
                ):
    """``LoadCurve.push`` of an accepted point, the sorted copy kept."""
    loads, values, pushed, meta = cc
    capacity = len(log_ring) // 2
    count = curve_ints[0]
    n = meta[0]
    if count >= capacity:  # the oldest point leaves
        leaving = log_ring[count % capacity]
        i = np.searchsorted(loads[:n], leaving)
        while pushed[i] != count - capacity:
            i += 1
        for j in range(i, n - 1):
            loads[j], values[j], pushed[j] = loads[j + 1], values[j + 1], pushed[j + 1]
        n -= 1
    i = np.searchsorted(loads[:n], log_load, side="right")  # after equal loads: newest last
    for j in range(n, i, -1):
        loads[j], values[j], pushed[j] = loads[j - 1], values[j - 1], pushed[j - 1]
    loads[i], values[i], pushed[i] = log_load, value, count
    meta[0] = n + 1
    _push(log_ring, curve_ints, 0, log_load)
    _push(value_ring, curve_ints, 1, value)


@njit(cache=True)
def _distance(load, x):
    """``abs(load - x)`` as numpy computes it (the rounded difference's magnitude)."""
    return x - load if load < x else load - x


@njit(cache=True)
def _curve_pick(cc, x, band, k, picked):
    """``LoadCurve._nearest`` at log load ``x``: the values of the ``k`` nearest points
    within ``band`` (ties at the k-th distance: the most recent) into ``picked``; returns k,
    or 0 when fewer than k are within the band. Distances are ``abs(load - x)`` as numpy
    computes them; along each side of ``x`` in the sorted loads they never decrease, so the k
    nearest are a run around ``x`` found by a two-way merge."""
    loads, values, pushed, meta = cc
    n = meta[0]
    if n < k:
        return 0
    right = np.searchsorted(loads[:n], x)
    left = right - 1
    kth = -1.0
    for _ in range(k):  # the k-th smallest distance
        dl = x - loads[left] if left >= 0 else np.inf
        dr = loads[right] - x if right < n else np.inf
        if dl <= dr:
            kth = dl
            left -= 1
        else:
            kth = dr
            right += 1
    if not kth <= band:
        return 0
    # those strictly nearer than the k-th: the taken run [left + 1, right - 1] less its ends
    # at the k-th distance (the largest on each side)
    a, b = left + 1, right - 1
    while a <= b and _distance(loads[a], x) >= kth:
        a += 1
    while b >= a and _distance(loads[b], x) >= kth:
        b -= 1
    m = 0
    for i in range(a, b + 1):
        picked[m] = values[i]
        m += 1
    # every point at exactly the k-th distance, on either side (beyond the taken run too)
    first_tie = m
    tie_lo = a - 1
    while tie_lo >= 0 and _distance(loads[tie_lo], x) == kth:
        tie_lo -= 1
    tie_lo += 1
    tie_hi = b + 1
    while tie_hi < n and _distance(loads[tie_hi], x) == kth:
        tie_hi += 1
    lo, hi = b, a  # the strictly nearer run, skipped among the ties
    need = k - first_tie
    while need > 0:  # the most recent tie not yet taken (few: usually one)
        best = -1
        for i in range(tie_lo, tie_hi):
            if hi <= i <= lo:
                continue
            if pushed[i] >= 0 and (best < 0 or pushed[i] > pushed[best]):
                best = i
        picked[m] = values[best]
        m += 1
        pushed[best] = -pushed[best] - 1  # taken (restored below)
        need -= 1
    for i in range(tie_lo, tie_hi):
        if pushed[i] < 0:
            pushed[i] = -pushed[i] - 1
    return m


# ---------------------------------------------------------------- RobustDetector


@njit(cache=True, nogil=True)
def robust_replay(values, log_loads, predictions, sb, sb_ints, curve, curve_ints, hy, hy_ints,
                  tails, tail_ints, factors, spread_z, spread_v, state, fp, ip,
                  out_expected, out_z, out_score, out_flags):
    """``RobustDetector.update`` for every point of ``values``.

    ``curve``: the load curve's (log-load ring, value ring), or empty arrays without one;
    ``hy``: the level's and the spread's hysteresis windows (2 x for_points), ``hy_ints`` their
    integer state (2 x 4, ``HY_*``); ``tails``: the trailing, seasonal, load and spread tails'
    rings; ``spread_z``/``spread_v`` (kinds x spread_points) with ``state[kind]`` points: the
    spread windows, one per kind of expectation; ``state[3]``: was active, ``state[4]``: the
    exclusion's run.
    ``out_flags`` bits: 1 active, 2 started, 4 level warning, 8 judged at the load.
    """
    (z_alert0, z_clear0, z_extreme0, spread_alert0, spread_clear0, rel_floor, abs_floor,
     tail_q, band, ref_level, ref_spread) = fp
    (direction, min_points, min_seasonal, trend_points, for_points, required, clear_points,
     extreme_points, relearn, spread_points, tail_refresh, tail_min_points, curve_points,
     min_neighbours, has_curve) = ip
    work = np.empty(len(tails[0]) // 2 + 1)  # the tail quantiles' selection
    picked = np.empty(curve_points + 1)
    log_ring, value_ring = curve
    curve_cache = new_curve_cache(log_ring, value_ring, curve_ints[0])
    cache = new_cache(sb, sb_ints, trend_points)
    guesses = np.full(4, np.nan)
    recent_level = hy[0]
    recent_spread = hy[1]
    hy_level = hy_ints[0]
    hy_spread = hy_ints[1]
    for t in range(len(values)):
        value = values[t]
        log_load = log_loads[t]
        # the expectation: at the load, else the baseline (its prediction recorded only then)
        found = False
        expected = math.nan
        scale = math.nan
        seasonal = False
        at_load = False
        prediction = math.nan
        if has_curve and not math.isnan(log_load):
            m = _curve_pick(curve_cache, log_load, band, min_neighbours, picked)
            if m:
                level = _median_of(picked, m)
                for i in range(m):
                    picked[i] = abs(picked[i] - level)
                mad = _median_of(picked, m)
                found, expected, at_load, seasonal = True, level, True, False
                scale = max(1.4826 * mad, rel_floor * abs(level), abs_floor)
        if not found:
            prediction = predictions[t]
            found, expected, scale, seasonal = _sb_current(
                sb, sb_ints, prediction, min_points, min_seasonal, trend_points, rel_floor,
                abs_floor, cache)
        if not found or math.isnan(value):
            _sb_push(sb, sb_ints, value, True, prediction, 0, cache)
            if has_curve and not math.isnan(log_load) and not math.isnan(value):
                _curve_push(log_ring, value_ring, curve_ints, curve_cache, log_load, value)
            out_expected[t] = expected if found else math.nan
            out_z[t] = math.nan
            out_score[t] = 0.0
            out_flags[t] = 1 if state[3] else 0
            continue
        z = (value - expected) / scale
        if direction == UP:
            bad = z
        elif direction == DOWN:
            bad = -z
        else:
            bad = abs(z)
        kind = KIND_LOAD if at_load else (KIND_SEASONAL if seasonal else KIND_TRAILING)
        _tail_push(tails[kind], tail_ints, kind, factors, bad, ref_level, tail_refresh,
                   tail_min_points, tail_q, work, guesses)
        f = factors[kind]
        z_alert, z_clear, z_extreme = f * z_alert0, f * z_clear0, f * z_extreme0
        _hy_update(recent_level, hy_level, bad >= z_alert, bad < z_clear, bad >= z_extreme,
                   for_points, required, clear_points, extreme_points)
        # the spread (RobustDetector._spread), over this kind's window
        window_z, window_v = spread_z[kind], spread_v[kind]
        k = state[kind]
        if k == spread_points:
            for i in range(k - 1):
                window_z[i] = window_z[i + 1]
                window_v[i] = window_v[i + 1]
            window_z[k - 1] = z
            window_v[k - 1] = value
        else:
            window_z[k] = z
            window_v[k] = value
            state[kind] = k + 1
        spread = math.nan
        if state[kind] >= spread_points:
            m = state[kind]
            for i in range(m):
                picked[i] = window_v[i]
            level_v = abs(_median_of(picked, m))
            for i in range(m):
                picked[i] = window_z[i]
            center = _median_of(picked, m)
            for i in range(m):
                picked[i] = abs(window_z[i] - center)
            spread = _median_of(picked, m)
            if level_v > abs(expected):
                spread *= abs(expected) / level_v
            _tail_push(tails[3], tail_ints, 3, factors, spread, ref_spread, tail_refresh,
                       tail_min_points, tail_q, work, guesses)
            fs = factors[3]
            _hy_update(recent_spread, hy_spread, spread >= fs * spread_alert0,
                       spread < fs * spread_clear0, False, for_points, required,
                       clear_points, 1)
        anomalous = (bad >= z_extreme or (hy_level[HY_ACTIVE] == 1 and bad >= z_clear)
                     or hy_spread[HY_ACTIVE] == 1)
        if not anomalous:
            state[4] = 0
            accepted = True
        else:
            state[4] += 1
            accepted = state[4] > relearn
        _sb_push(sb, sb_ints, value, accepted, prediction, 0, cache)
        if (has_curve and accepted and not math.isnan(log_load)
                and not math.isnan(value)):
            _curve_push(log_ring, value_ring, curve_ints, curve_cache, log_load, value)
        active = hy_level[HY_ACTIVE] == 1 or hy_spread[HY_ACTIVE] == 1
        started = active and not state[3]
        state[3] = 1 if active else 0
        score = _squash(bad, z_alert)
        if hy_spread[HY_ACTIVE] == 1:
            spread_alert = factors[3] * spread_alert0
            s = _squash(spread - _SPREAD_NORMAL, spread_alert - _SPREAD_NORMAL)
            score = s if s > score else score
        out_expected[t] = expected
        out_z[t] = z
        out_score[t] = score
        out_flags[t] = ((1 if active else 0) | (2 if started else 0) | (4 if active else 0)
                        | (8 if at_load else 0))


# ---------------------------------------------------------------- RatioDetector


@njit(cache=True, nogil=True)
def ratio_replay(values, loads, predictions, efficiency_predictions, sb, sb_ints, eff,
                 eff_ints, hy, hy_ints, state, fp, ip, out_expected, out_z, out_score,
                 out_ratio, out_flags):
    """``RatioDetector.update`` for every point. ``sb``/``eff``: the throughput's and the
    efficiency's baselines; ``hy``: warning and critical windows; ``state[0]``: the
    exclusion's run. ``out_flags`` bits: 1 active, 2 started, 4 warning, 16 critical."""
    (rel_floor, abs_floor, capacity_q, ratio_warning, ratio_critical, margin) = fp
    (min_points, min_seasonal, trend_points, for_points, clear_points, relearn,
     quantile_points) = ip
    cache = new_cache(sb, sb_ints, trend_points)
    eff_cache = new_cache(eff, eff_ints, trend_points)
    warning_recent, critical_recent = hy[0], hy[1]
    warning, critical = hy_ints[0], hy_ints[1]
    for t in range(len(values)):
        value = values[t]
        load = loads[t]
        prediction = predictions[t]
        eff_prediction = efficiency_predictions[t]
        has_load = math.isfinite(load) and load > 0
        e_found, e_expected, e_scale, _ = _sb_current(
            eff, eff_ints, eff_prediction, min_points, min_seasonal, trend_points, rel_floor,
            abs_floor, eff_cache)
        per_load = value / load if has_load else math.nan
        expected = math.nan
        scale = math.nan
        judged = True
        if has_load and e_found and e_expected > 0:
            expected = e_expected * load
            capacity = _sb_quantile(sb[6], sb_ints[SB_WINDOW], capacity_q)
            if math.isfinite(capacity) and capacity > 0:
                expected = capacity if capacity < expected else expected
            scale = e_scale * load
        else:
            o_found, o_expected, o_scale, _ = _sb_current(
                sb, sb_ints, prediction, min_points, min_seasonal, trend_points, rel_floor,
                abs_floor, cache)
            if o_found and o_expected > 0:
                expected, scale = o_expected, o_scale
            else:
                judged = False
        if not judged or math.isnan(value):
            _sb_push(sb, sb_ints, value, True, prediction, quantile_points, cache)
            _sb_push(eff, eff_ints, per_load, True, eff_prediction, 0, eff_cache)
            out_expected[t] = expected  # NaN when not judged
            out_z[t] = math.nan
            out_score[t] = 0.0
            out_ratio[t] = math.nan
        else:
            ratio = value / expected
            started = _hy_update(warning_recent, warning, ratio < ratio_warning,
                                 ratio >= ratio_warning + margin, False, for_points,
                                 for_points, clear_points, 1)
            _hy_update(critical_recent, critical, ratio < ratio_critical,
                       ratio >= ratio_critical + margin, False, for_points, for_points,
                       clear_points, 1)
            if not (warning[HY_ACTIVE] == 1 and ratio < ratio_warning + margin):
                state[0] = 0
                accepted = True
            else:
                state[0] += 1
                accepted = state[0] > relearn
            _sb_push(sb, sb_ints, value, accepted, prediction, quantile_points, cache)
            _sb_push(eff, eff_ints, per_load, accepted, eff_prediction, 0, eff_cache)
            out_expected[t] = expected
            out_z[t] = (value - expected) / scale
            out_score[t] = _squash(1.0 - ratio, 1.0 - ratio_warning)
            out_ratio[t] = ratio
            out_flags[t] = 2 if started else 0
        flags = out_flags[t] if judged and not math.isnan(value) else 0
        if warning[HY_ACTIVE] == 1:
            flags |= 1 | 4
        if critical[HY_ACTIVE] == 1:
            flags |= 16
        out_flags[t] = flags
