"""Histogram bucket boundaries, and Prometheus's quantile interpolation over them.

Latency buckets are the ISO 3 / Renard preferred numbers (R5, R10, R20, R40) over a range,
merged with the SLO thresholds and a few round durations. Renard series suit this job:

- they are log-spaced (R20 steps are 10**(1/20) ~ 1.122, never more than 1.143 after rounding);
- they are "nice": three significant digits at most, so ``le`` labels print cleanly;
- they nest (R10 is every 2nd R20 value), so a coarse histogram can be merged into a fine one;
- R10 and finer contain 1, 2, 2.5 and 5 in every decade, so every SLO threshold below is an
  exact boundary and an SLI ("requests under 500 ms") is a bucket count, not an interpolation.

Density trade-off (R20 is the default for request latencies). histogram_quantile interpolates
linearly inside a bucket; for a density ~ x**-k over a bucket of ratio r its error is second
order, ~ k (r - 1)**2 / 8 at worst: r = 1.143 (R20's widest, 1.40-1.60) gives <= 1.5% for k <= 7
(lognormal sigma >= 0.5, Pareto alpha <= 6, heavy gamma/Weibull, the realistic mixtures) but
2.0-2.6% for tight or light tails at p99 (lognormal sigma 0.25, gamma k=10, Weibull k=3; k ~ 10)
and 4.9% for lognormal sigma 0.1. R20 costs ~98 buckets over 1 ms..60 s (121 to 600 s): ~100
series per histogram and label set, ~1 us per observe in prometheus_client; R40 would bring
the linear worst to 0.7% for twice the series, an extra 1.5 mantissa a decade (R20's widest
bucket split) only to 2.1%. So inferwatch's own estimate is ``log_slope_quantile`` (carried
as ``QuantileEstimate.refined`` and the percentile API's ``refined``): same buckets, the
density inside the bucket taken as the power law read off its two neighbours; its worst is
0.5% (sigma 0.1) and 0.3% otherwise, at no series cost. Grafana, alerts, any other PromQL
consumer and ``QuantileEstimate.value`` keep histogram_quantile's linear numbers (issue 21,
bench/percentile_accuracy.py). Latency SLOs need the accuracy; diagnostic histograms (engine
step stages) use R10 at half the cost.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Final

# Latency SLO thresholds in use; each must be an exact bucket boundary of every latency histogram.
SLO_THRESHOLDS_SECONDS: Final[tuple[float, ...]] = (0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 5.0)

# Round durations people set timeouts and SLOs at, merged into latency buckets when in range.
ROUND_DURATIONS_SECONDS: Final[tuple[float, ...]] = (
    10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)

# ISO 3 Renard R40 mantissas of one decade; R20, R10, R5 are every 2nd, 4th, 8th value.
_R40_MANTISSAS: Final[tuple[str, ...]] = (
    "1.00", "1.06", "1.12", "1.18", "1.25", "1.32", "1.40", "1.50", "1.60", "1.70",
    "1.80", "1.90", "2.00", "2.12", "2.24", "2.36", "2.50", "2.65", "2.80", "3.00",
    "3.15", "3.35", "3.55", "3.75", "4.00", "4.25", "4.50", "4.75", "5.00", "5.30",
    "5.60", "6.00", "6.30", "6.70", "7.10", "7.50", "8.00", "8.50", "9.00", "9.50",
)
_RENARD_STEP: Final[Mapping[int, int]] = MappingProxyType({40: 1, 20: 2, 10: 4, 5: 8})

# Prometheus ignores relative count deltas this small between adjacent buckets (float noise).
_SMALL_DELTA_TOLERANCE: Final[float] = 1e-12


def _renard_values(per_decade: int, min_value: float, max_value: float) -> list[float]:
    """Renard R<per_decade> values in [min_value, max_value], built from decimal strings so
    each float is the one its short decimal spelling parses to (clean ``le`` labels)."""
    step = _RENARD_STEP[per_decade]
    mantissas = _R40_MANTISSAS[::step]
    first_decade = math.floor(math.log10(min_value)) - 1
    last_decade = math.ceil(math.log10(max_value)) + 1
    return [
        value
        for decade in range(first_decade, last_decade + 1)
        for mantissa in mantissas
        if min_value <= (value := float(f"{mantissa}e{decade}")) <= max_value
    ]


def latency_buckets(
    min_seconds: float = 0.001,
    max_seconds: float = 60.0,
    per_decade: int = 20,
) -> tuple[float, ...]:
    """Finite upper bounds (seconds) for a latency histogram, sorted and unique.

    Renard R``per_decade`` values over [min_seconds, max_seconds] (5, 10, 20 or 40 per decade),
    plus the SLO thresholds and round durations inside that range, plus both ends themselves.
    """
    if per_decade not in _RENARD_STEP:
        raise ValueError(f"per_decade must be one of {sorted(_RENARD_STEP)}, got {per_decade}")
    if not 0 < min_seconds < max_seconds or math.isinf(max_seconds):
        raise ValueError(
            f"need 0 < min_seconds < max_seconds < inf, got {min_seconds}, {max_seconds}"
        )
    merged = set(_renard_values(per_decade, min_seconds, max_seconds))
    merged.update(
        value
        for value in (*SLO_THRESHOLDS_SECONDS, *ROUND_DURATIONS_SECONDS)
        if min_seconds <= value <= max_seconds
    )
    merged.update((min_seconds, max_seconds))
    return tuple(sorted(merged))


def power_of_two_buckets(max_value: int) -> tuple[float, ...]:
    """1, 2, 4, ... up to max_value (itself a power of two): batch sizes, tokens per step."""
    if max_value < 1 or max_value & (max_value - 1):
        raise ValueError(f"max_value must be a power of two >= 1, got {max_value}")
    return tuple(float(1 << i) for i in range(max_value.bit_length()))


def token_count_buckets(max_tokens: int = 100_000) -> tuple[float, ...]:
    """1, 2, 5, 10, 20, 50, ... up to max_tokens: token counts per request."""
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    values = [m * 10**e for e in range(len(str(max_tokens))) for m in (1, 2, 5)]
    return tuple(float(v) for v in values if v <= max_tokens)


def interpolate_quantile(
    q: float,
    buckets: Sequence[float],
    cumulative_counts: Sequence[float],
) -> float:
    """The q-quantile of a classic histogram, computed exactly as PromQL's histogram_quantile.

    ``buckets`` are the ``le`` upper bounds and ``cumulative_counts`` their ``_bucket`` values,
    in any order (they are sorted together). The +Inf bucket is either the last bound given, or
    implied by one count more than bounds. Like Prometheus (promql/quantile.go bucketQuantile):
    NaN for q NaN, no +Inf bucket, fewer than two buckets or no observations; -Inf for q < 0,
    +Inf for q > 1; duplicate bounds are summed; float noise (relative delta <= 1e-12) and
    non-monotonic counts are smoothed; the lowest bucket interpolates from 0 when its bound is
    positive (else returns its bound); a quantile in the +Inf bucket returns the highest finite
    bound.
    """
    if math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    pairs = _paired_buckets(buckets, cumulative_counts)
    if not pairs or not math.isinf(pairs[-1][0]) or pairs[-1][0] < 0:
        return math.nan
    bounds, counts = _coalesce(pairs)
    _correct_precision_errors(counts)
    _ensure_monotonic(counts)
    if len(bounds) < 2 or counts[-1] == 0:
        return math.nan
    return _interpolate(q * counts[-1], bounds, counts)


def _paired_buckets(
    buckets: Sequence[float], cumulative_counts: Sequence[float]
) -> list[tuple[float, float]]:
    bounds = list(buckets)
    if len(cumulative_counts) == len(bounds) + 1:
        bounds.append(math.inf)
    elif len(cumulative_counts) != len(bounds):
        raise ValueError(
            f"{len(cumulative_counts)} counts for {len(bounds)} bounds: give one count per "
            "bound, or one more for an implied +Inf bucket"
        )
    return sorted(zip(bounds, (float(c) for c in cumulative_counts)), key=lambda p: p[0])


def _coalesce(pairs: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """Merge buckets with the same bound by summing their counts (as Prometheus does)."""
    bounds: list[float] = []
    counts: list[float] = []
    for bound, count in pairs:
        if bounds and bound == bounds[-1]:
            counts[-1] += count
        else:
            bounds.append(bound)
            counts.append(count)
    return bounds, counts


def _correct_precision_errors(counts: list[float]) -> None:
    previous = counts[0]
    for i in range(1, len(counts)):
        delta = abs(counts[i] - previous)
        if delta == 0:
            continue
        if counts[i] != 0 and delta / counts[i] <= _SMALL_DELTA_TOLERANCE:
            counts[i] = previous
        else:
            previous = counts[i]


def _ensure_monotonic(counts: list[float]) -> None:
    """Replace any decrease by the running maximum (the envelope Prometheus computes)."""
    highest = counts[0]
    for i in range(1, len(counts)):
        if counts[i] > highest:
            highest = counts[i]
        elif counts[i] < highest:
            counts[i] = highest


def _interpolate(rank: float, bounds: list[float], counts: list[float]) -> float:
    # First bucket (the +Inf one excluded) whose cumulative count reaches the rank.
    b = bisect.bisect_left(counts, rank, 0, len(counts) - 1)
    if b == len(bounds) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start, end, count = 0.0, bounds[b], counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    if count == 0:
        return math.nan  # rank 0 in an empty lowest bucket: Go's 0/0
    return start + (end - start) * (rank / count)


# The local power law read off two neighbouring buckets is held to |exponent x log-width| <= 50
# (a density falling 5e21-fold across one bucket is already a step; beyond, exp overflows).
_MAX_LOG_SLOPE_SPAN: Final[float] = 50.0


def log_slope_quantile(
    q: float,
    buckets: Sequence[float],
    cumulative_counts: Sequence[float],
) -> float:
    """The q-quantile of a classic histogram, interpolated along the density's local power law
    instead of linearly: inferwatch's own estimate (issue 21); PromQL stays linear.

    Same bucket, same rank and same edge cases as ``interpolate_quantile`` (it returns
    PromQL's number in the first bucket, in +Inf, and where a bound is not positive). Inside
    a bucket (a, c] the density per unit of log x is taken as exp(s log x): s is the slope
    of log(count / log-width) between the two neighbouring buckets (one neighbour and the
    bucket itself where the other is missing or empty; s = 0, uniform in log x, where both
    are). Linear interpolation amounts to s = +1 whatever the data; a latency tail has
    s = -(k - 1) for a density ~ x**-k, k 3..12 at p99, and the bias of a fixed s grows with
    the difference (times the squared log-width of the bucket: up to 2.4% at R20 for a
    Weibull shape 3 tail). Read off the neighbours, the bias is third order: <= 0.5% at R20
    for every shape of bench/percentile_accuracy.py. Like PromQL's, the result stays inside
    the bucket, so with few observations in it the error is bounded by the bucket's width.
    """
    linear = interpolate_quantile(q, buckets, cumulative_counts)
    if math.isnan(linear) or not 0 < q < 1:
        return linear
    bounds, counts = _coalesce(_paired_buckets(buckets, cumulative_counts))
    _correct_precision_errors(counts)
    _ensure_monotonic(counts)
    return _log_slope_at(q, bounds, counts, linear)


def _log_slope_at(q: float, bounds: list[float], counts: list[float], linear: float) -> float:
    """log_slope_quantile on buckets already merged and smoothed as PromQL does; ``linear``
    is PromQL's number, returned where the log-slope rule does not apply."""
    if math.isnan(linear) or not 0 < q < 1:
        return linear
    rank = q * counts[-1]
    b = bisect.bisect_left(counts, rank, 0, len(counts) - 1)  # as _interpolate finds it
    if b == 0 or b == len(bounds) - 1 or bounds[b - 1] <= 0:
        return linear
    inside = counts[b] - counts[b - 1]
    if inside <= 0:
        return linear
    low, high = math.log(bounds[b - 1]), math.log(bounds[b])
    width = high - low
    here = (inside / width, low + width / 2)
    found = [d for d in (_log_density(bounds, counts, b - 1), _log_density(bounds, counts, b + 1))
             if d is not None and d[0] > 0]
    if len(found) == 2:
        (d0, y0), (d1, y1) = found
    elif len(found) == 1:
        (d0, y0), (d1, y1) = sorted((found[0], here), key=lambda d: d[1])
    else:
        d0, y0, d1, y1 = 1.0, 0.0, 1.0, 1.0
    span = (math.log(d1) - math.log(d0)) / (y1 - y0) * width
    span = max(-_MAX_LOG_SLOPE_SPAN, min(_MAX_LOG_SLOPE_SPAN, span))
    fraction = (rank - counts[b - 1]) / inside
    if abs(span) < 1e-9:
        return math.exp(low + fraction * width)
    return math.exp(low + math.log1p(fraction * math.expm1(span)) / span * width)


def _log_density(bounds: list[float], counts: list[float], i: int) -> tuple[float, float] | None:
    """(count per unit of log x, log-midpoint) of bucket i, None where it has no finite,
    positive log-width (the first bucket, the +Inf bucket, a bound not positive)."""
    if i < 1 or i > len(bounds) - 2 or bounds[i - 1] <= 0:
        return None
    low, high = math.log(bounds[i - 1]), math.log(bounds[i])
    return (counts[i] - counts[i - 1]) / (high - low), (low + high) / 2


class EstimateKind(StrEnum):
    """What a percentile read from buckets can honestly claim (see ``estimate_quantile``)."""

    NO_DATA = "no_data"            # no observations: NaN
    EXACT_EDGE = "exact_edge"      # the rank is the count at an edge: "q of them <= edge"
    INTERPOLATED = "interpolated"  # inside a narrow bucket: the number is shown
    INTERVAL = "interval"          # inside a wide bucket: only "between lower and upper"
    UPPER_BOUND = "upper_bound"    # in the first bucket: only "< upper"
    LOWER_BOUND = "lower_bound"    # in the +Inf bucket: only "> lower"


# A bucket whose upper/lower ratio exceeds this is too wide to show an interpolated number
# (see ``estimate_quantile``).
MAX_INTERPOLATED_RATIO: Final[float] = 2.0


@dataclass(frozen=True, slots=True)
class QuantileEstimate:
    """A quantile read from a classic histogram: PromQL's number (``value``, kept for
    compatibility and plots), the bucket edges it is known to lie between (``lower``,
    ``upper``; -inf/+inf where unbounded), what may be claimed (``kind``) and inferwatch's
    closer number inside the same bucket (``refined``)."""

    value: float
    lower: float
    upper: float
    kind: EstimateKind
    # inferwatch's own number (``log_slope_quantile``): p99 within 0.5% of the truth on R20
    # buckets where ``value`` (PromQL, linear) is up to 2.6% off (issue 21); NaN: not made.
    refined: float = math.nan

    @property
    def is_bound(self) -> bool:
        """Only a bound or an interval is known, not a number worth quoting."""
        return self.kind in (EstimateKind.UPPER_BOUND, EstimateKind.LOWER_BOUND,
                             EstimateKind.INTERVAL)

    def text(self, fmt: Callable[[float], str]) -> str:
        """What to print, the numbers written by ``fmt``: "< 300 ms", "> 10 s",
        "100 ms – 250 ms", or the value itself."""
        if self.kind is EstimateKind.UPPER_BOUND:
            return f"< {fmt(self.upper)}"
        if self.kind is EstimateKind.LOWER_BOUND:
            return f"> {fmt(self.lower)}"
        if self.kind is EstimateKind.INTERVAL:
            return f"{fmt(self.lower)} – {fmt(self.upper)}"
        return fmt(self.value)


def estimate_quantile(
    q: float,
    buckets: Sequence[float],
    cumulative_counts: Sequence[float],
) -> QuantileEstimate:
    """The q-quantile of a classic histogram with what its buckets can vouch for.

    ``value`` is ``interpolate_quantile``'s (PromQL's) number, ``refined`` is
    ``log_slope_quantile``'s in the same bucket; the bucket is the one PromQL interpolates
    in, found the same way. The rule:

    - rank in the +Inf bucket: ``lower_bound`` ("> highest finite edge"); PromQL returns the
      edge, but the quantile may be anything above it.
    - rank in the first bucket, (0, b0]: ``upper_bound`` ("< b0"). Its upper/lower ratio is
      infinite: PromQL's linear guess from 0 says nothing (issue 21: every request of a vLLM
      target in vLLM's first E2E bucket, 0-0.3 s, read as p99 0.297 s against 0.106 s
      measured by the client).
    - rank equal to the cumulative count at an edge: ``exact_edge``: exactly q of the
      observations are at or below that edge, a count rather than a guess.
    - otherwise in (lo, hi]: ``interpolated`` when hi/lo <= MAX_INTERPOLATED_RATIO (2),
      else ``interval``. Whatever the density inside the bucket, the truth and the
      interpolated number both lie in (lo, hi], so they differ by less than a factor hi/lo.
      Up to 2 the number is still the right order and usually far closer (the schema's own
      R20 buckets, ratio <= 1.143, are within 2.6% linearly, 0.5% with ``refined``: see the
      module docstring); wider than 2
      (vLLM's 0.1-0.25 s, 1-2.5 s TTFT buckets; 1920-7680 s E2E) a single number can be off
      by more than 2x, so only the interval is claimed.
    """
    value = interpolate_quantile(q, buckets, cumulative_counts)
    if math.isnan(value) or not 0 <= q <= 1:
        return QuantileEstimate(value, math.nan, math.nan, EstimateKind.NO_DATA)
    bounds, counts = _coalesce(_paired_buckets(buckets, cumulative_counts))
    _correct_precision_errors(counts)
    _ensure_monotonic(counts)
    rank = q * counts[-1]
    refined = _log_slope_at(q, bounds, counts, value)
    b = bisect.bisect_left(counts, rank, 0, len(counts) - 1)  # as _interpolate finds it
    if b == len(bounds) - 1:
        return QuantileEstimate(value, bounds[-2], math.inf, EstimateKind.LOWER_BOUND, refined)
    if b == 0:
        lower = 0.0 if bounds[0] > 0 else -math.inf
        return QuantileEstimate(value, lower, bounds[0], EstimateKind.UPPER_BOUND, refined)
    lower, upper = bounds[b - 1], bounds[b]
    if math.isclose(rank, counts[b], rel_tol=1e-9):
        return QuantileEstimate(value, lower, upper, EstimateKind.EXACT_EDGE, refined)
    wide = lower <= 0 or upper / lower > MAX_INTERPOLATED_RATIO
    kind = EstimateKind.INTERVAL if wide else EstimateKind.INTERPOLATED
    return QuantileEstimate(value, lower, upper, kind, refined)
