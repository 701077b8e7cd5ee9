"""Judging per-request samples that are not independent, and baselines and canaries that saw
different length mixes (issue 17). Pure functions over arrays, no I/O.

Dependence. Requests sent in the same interval meet the same state of their server (a queue,
a stall, a warm or cold prefix cache), and the ITL gaps of one request share its batch: a run
of 75 requests gives thousands of ITL samples but nowhere near thousands of independent ones.
The judge's default method, ``cluster-bootstrap``, therefore takes the interval as the unit
of evidence:

* Each side's samples are summed per interval (its clusters; a request's ITL gaps all fall in
  the interval its request was sent in, so a request is never split). The statistic is the
  canary/baseline ratio of geometric means (the difference of the means of log latency), or
  the ratio of arithmetic means where a value is <= 0, or the difference of means for a
  metric judged on an absolute change; each a ratio of per-interval sums, so one resample
  costs O(intervals), whatever the number of samples.
* Its interval is a moving-block bootstrap over the intervals in time order (blocks of about
  intervals^(1/3), so that load and queueing that persist over a few intervals stay
  together), with the *same* intervals drawn for both sides: in a paired run (``inferwatch
  canary live``) both sides got the same arrivals at the same moments, so a burst that slows
  both cancels in the ratio, and only what differs between the servers counts. The spread of
  the resampled statistic, times sqrt(G/(G-1)) for G intervals, around the estimate gives
  the interval at the configured confidence; its bootstrap p-value is twice the smaller tail
  beyond 0.
* Chosen over judging per-interval aggregates alone (an interval's median of 16 requests is
  a noisy summary, and an interval with one request would weigh as much as one with 50) and
  over the Mann-Whitney design effect of issue 21 (``design-effect``: one variance inflation
  for the whole normal approximation, which under-covers with strong clustering: 7.7% false
  positives at a nominal 5% in ``tests/monitor/canary/test_judge.py``). With fewer than
  ``MIN_CLUSTERS`` intervals a bootstrap over intervals says little, and the judge falls back
  to the design effect, saying so.

Length mix. In a paired run both sides get the same prompts, but stored data or a canary
with other traffic (or a model that answers at other lengths) may not: longer prompts alone
raise TTFT and E2E. When a metric's samples' prompt (or, for E2E, output) lengths differ
between the sides (two-sample Kolmogorov-Smirnov statistic >= ``MIX_MIN_KS`` and p <
``MIX_ALPHA``), each sample is divided by the baseline's expected latency at its lengths (a
least-squares line fitted on the baseline, refitted once without points beyond 3 MADs, so
that stalls do not bend it; floored at 5% of the baseline median) and rescaled to baseline
units: a canary that is as fast as its baseline per prompt token then compares equal, one
that is slower per token still does not. The adjustment's fit is not resampled (its
uncertainty, from hundreds of baseline requests, is small beside that of the intervals).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy import stats

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Method = Literal["cluster-bootstrap", "design-effect", "independent"]
METHODS: tuple[str, ...] = ("cluster-bootstrap", "design-effect", "independent")

MIN_CLUSTERS = 5
MIX_MIN_KS = 0.1
MIX_ALPHA = 0.01
LENGTH_NAMES = ("prompt", "output")


@dataclass(frozen=True, slots=True)
class BootstrapResult:
    """``estimate`` and [``low``, ``high``] on the statistic's scale (log ratio, or the
    absolute difference when ``scale`` is "absolute"); ``p_value`` two-sided."""

    estimate: float
    low: float
    high: float
    p_value: float
    scale: Literal["log-geometric", "log-arithmetic", "absolute"]
    clusters: int
    block: int
    resamples: int
    paired: bool

    def describe(self) -> str:
        stat = {"log-geometric": "ratio of geometric means",
                "log-arithmetic": "ratio of means",
                "absolute": "difference of means"}[self.scale]
        pairing = "the same intervals on both sides" if self.paired else "intervals per side"
        return (f"cluster bootstrap of the {stat} over {self.clusters} intervals "
                f"({self.resamples} resamples, blocks of {self.block}, {pairing})")


def auto_block(clusters: int) -> int:
    """The moving-block length for ``clusters`` intervals: about clusters^(1/3)."""
    return max(1, int(round(clusters ** (1.0 / 3.0))))


def cluster_bootstrap(b: FloatArray, c: FloatArray, b_groups: IntArray, c_groups: IntArray,
                      confidence: float, absolute: bool, resamples: int = 1000,
                      block: int = 0, seed: int = 0, name: str = "") -> BootstrapResult:
    """The canary-vs-baseline statistic of the module docstring and its moving-block
    bootstrap interval over the clusters. Labels are ordered in time (interval indices);
    a label present on both sides is one interval of a paired run and is drawn for both.
    ``block`` 0 picks ``auto_block``; the generator is seeded by ``seed`` and ``name`` so a
    verdict is reproducible. Needs at least 2 clusters and samples on both sides."""
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, not {resamples}")
    if absolute:
        scale: Literal["log-geometric", "log-arithmetic", "absolute"] = "absolute"
        yb, yc = b, c
    elif b.min() > 0 and c.min() > 0:
        scale, yb, yc = "log-geometric", np.log(b), np.log(c)
    else:
        scale, yb, yc = "log-arithmetic", b, c
    labels, inverse = np.unique(np.concatenate([b_groups, c_groups]), return_inverse=True)
    g = int(labels.size)
    if g < 2:
        raise ValueError("a cluster bootstrap needs at least 2 clusters")
    ib, ic = inverse[:b.size], inverse[b.size:]
    sums_b = np.bincount(ib, weights=yb, minlength=g)
    sums_c = np.bincount(ic, weights=yc, minlength=g)
    counts_b = np.bincount(ib, minlength=g).astype(np.float64)
    counts_c = np.bincount(ic, minlength=g).astype(np.float64)
    paired = bool(np.intersect1d(b_groups, c_groups).size)

    def statistic(sb: FloatArray, nb: FloatArray, sc: FloatArray,
                  nc: FloatArray) -> FloatArray:
        with np.errstate(divide="ignore", invalid="ignore"):
            mean_b, mean_c = sb / nb, sc / nc
            if scale == "log-arithmetic":
                out: FloatArray = np.log(mean_c) - np.log(mean_b)
            else:
                out = mean_c - mean_b
        return out

    estimate = float(statistic(sums_b.sum(keepdims=True), counts_b.sum(keepdims=True),
                               sums_c.sum(keepdims=True), counts_c.sum(keepdims=True))[0])
    block = min(block or auto_block(g), g)
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    blocks_per = math.ceil(g / block)
    rows = np.repeat(np.arange(resamples) * g, g)

    def draw() -> FloatArray:
        """Per resample, how often each cluster was drawn (moving blocks, G in all)."""
        starts = rng.integers(0, g - block + 1, (resamples, blocks_per))
        picks = (starts[:, :, None] + np.arange(block)).reshape(resamples, -1)[:, :g]
        counts: FloatArray = np.bincount(rows + picks.ravel(), minlength=resamples * g
                                         ).reshape(resamples, g).astype(np.float64)
        return counts

    weights = draw()
    # Disjoint labels (two unrelated runs): each side's intervals drawn on their own.
    weights_c = weights if paired else draw()
    values = statistic(weights @ sums_b, weights @ counts_b, weights_c @ sums_c,
                       weights_c @ counts_c)
    values = values[np.isfinite(values)]  # a resample without one side's samples
    if values.size == 0:
        return BootstrapResult(estimate, -math.inf, math.inf, 1.0, scale, g, block,
                               resamples, paired)
    alpha = 1.0 - confidence
    spread = math.sqrt(g / (g - 1))
    centre = float(np.mean(values))
    q_low, q_high = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    low = estimate + spread * (float(q_low) - centre)
    high = estimate + spread * (float(q_high) - centre)
    # Two-sided bootstrap p-value of "no change": the share of the centred, widened
    # resamples beyond the estimate's distance from 0 (add-one so it is never 0).
    deviations = spread * (values - centre)
    beyond = int(np.sum(np.abs(deviations) >= abs(estimate)))
    p_value = min(1.0, (beyond + 1) / (values.size + 1))
    return BootstrapResult(estimate, low, high, p_value, scale, g, block, resamples, paired)


@dataclass(frozen=True, slots=True)
class LengthAdjustment:
    """What the length-mix check found for one metric: ``adjusted`` when the values were
    normalised, ``note`` the clause the verdict shows (empty when the mixes agree)."""

    adjusted: bool
    note: str
    baseline: FloatArray
    canary: FloatArray


def length_mix(b: FloatArray, c: FloatArray, b_lengths: FloatArray, c_lengths: FloatArray,
               metric: str) -> LengthAdjustment:
    """``b`` and ``c`` normalised for their lengths when the mixes differ (module
    docstring), else unchanged. ``*_lengths``: one row per sample, columns prompt and
    output tokens (NaN where unknown). TTFT, TPOT and ITL are adjusted for the prompt
    length only (TPOT and ITL are per output token already); E2E for both."""
    columns = (0, 1) if metric == "e2e" else (0,)
    differing: list[int] = []
    clauses: list[str] = []
    for col in columns:
        lb, lc = b_lengths[:, col], c_lengths[:, col]
        if not (np.isfinite(lb).all() and np.isfinite(lc).all()) or lb.size < 5 or lc.size < 5:
            continue
        ks = stats.ks_2samp(lb, lc)
        if ks.statistic >= MIX_MIN_KS and ks.pvalue < MIX_ALPHA:
            differing.append(col)
            clauses.append(f"{LENGTH_NAMES[col]} tokens median {_g(float(np.median(lc)))} vs "
                           f"{_g(float(np.median(lb)))}")
    if not differing:
        return LengthAdjustment(False, "", b, c)
    zb, zc = b_lengths[:, differing], c_lengths[:, differing]
    coef = _robust_line(zb, b)
    floor = 0.05 * float(np.median(b))
    pred_b = np.maximum(coef[0] + zb @ coef[1:], floor)
    pred_c = np.maximum(coef[0] + zc @ coef[1:], floor)
    unit = float(np.median(pred_b))
    what = " and ".join(LENGTH_NAMES[col] for col in differing)
    note = (f"length mix differs ({'; '.join(clauses)}): normalised by the baseline's "
            f"latency at each {what} length")
    return LengthAdjustment(True, note, b / pred_b * unit, c / pred_c * unit)


def _robust_line(z: FloatArray, y: FloatArray) -> FloatArray:
    """Least squares y ~ a + z @ beta, refitted without residuals beyond 3 MADs; slopes
    below 0 (latency falling with length: noise) are set to 0."""
    design = np.column_stack([np.ones(len(y)), z])
    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    residuals = y - design @ coef
    mad = float(np.median(np.abs(residuals - np.median(residuals))))
    keep = np.abs(residuals - np.median(residuals)) <= 3 * 1.4826 * mad if mad > 0 else None
    if keep is not None and keep.sum() > design.shape[1] + 2:
        coef = np.linalg.lstsq(design[keep], y[keep], rcond=None)[0]
    if (coef[1:] < 0).any():
        slopes = np.maximum(coef[1:], 0.0)
        coef = np.concatenate([[float(np.mean(y - z @ slopes))], slopes])
    result: FloatArray = coef.astype(np.float64)
    return result


def lengths_array(rows: Sequence[Sequence[float]] | FloatArray, size: int,
                  side: str) -> FloatArray:
    """Rows of (prompt, output) tokens as a float array of shape (size, 2)."""
    arr = np.asarray(rows, dtype=np.float64)
    if arr.size == 0 and size == 0:
        return np.zeros((0, 2))
    if arr.ndim != 2 or arr.shape != (size, 2):
        raise ValueError(f"{side} lengths: expected {size} rows of (prompt, output) tokens, "
                         f"got shape {arr.shape}")
    return arr


def _g(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 10 else f"{value:.3g}"
