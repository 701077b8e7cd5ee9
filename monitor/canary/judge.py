"""A Kayenta-style statistical canary judge: pure functions over samples, no I/O.

Modelled on Netflix Kayenta's NetflixACAJudge: every metric is classified by a Mann-Whitney
comparison of the canary's samples against the baseline's (MannWhitneyClassifier), with the
Hodges-Lehmann shift and its distribution-free confidence interval as the effect, gated by an
allowed change so that a statistically significant but harmless difference still passes; the
per-metric verdicts are then scored per group and summed with group weights
(WeightedSumScorer).

Per-request samples clustered by the interval they were sent in are judged by a cluster
bootstrap instead (``dependent.py``: requests of one interval share their server's state and
are not independent samples), and normalised for their lengths when the two sides' length
mixes differ. Each result says which method judged it (``method``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy import stats

from monitor.canary.dependent import (
    METHODS,
    MIN_CLUSTERS,
    Method,
    cluster_bootstrap,
    length_mix,
    lengths_array,
)

FloatArray = npt.NDArray[np.float64]
Samples = Sequence[float] | npt.NDArray[Any]
# Per sample, its request's (prompt tokens, output tokens); NaN where unknown.
LengthRows = Sequence[Sequence[float]] | npt.NDArray[Any]

# Up to this many pairwise differences (32 MB of float64) the shift's order statistics are
# taken from the materialised differences; above it they are found by bisection on the shift.
EXACT_PAIRS_LIMIT = 4_000_000
# The bisection stops when its bracket is this fraction of the data range.
BISECT_RTOL = 1e-9


class Direction(StrEnum):
    """Which change of the metric is bad."""

    INCREASE = "increase"
    DECREASE = "decrease"
    EITHER = "either"


class Verdict(StrEnum):
    PASS = "pass"
    HIGH = "high"
    LOW = "low"
    NODATA = "nodata"


class Outcome(StrEnum):
    PASS = "pass"
    MARGINAL = "marginal"
    FAIL = "fail"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """How one metric is judged."""

    name: str
    direction: Direction = Direction.INCREASE
    # Effect-size gates: the canary/baseline ratio tolerated upward and downward.
    allowed_increase: float = 1.05
    allowed_decrease: float = 0.95
    # When set, the effect is the absolute shift (canary - baseline), allowed within +/- this:
    # for rates whose baseline may be 0 (error rate), where a ratio means nothing.
    allowed_absolute: float | None = None
    # A non-pass verdict fails the whole run alone (and NODATA too).
    critical: bool = False
    # NODATA counts as a failure of the run.
    must_have_data: bool = False
    group: str = "default"
    # Non-finite samples are dropped ("remove") or become 0.0 ("replace").
    nan_strategy: Literal["remove", "replace"] = "remove"


@dataclass(frozen=True, slots=True)
class JudgeConfig:
    metrics: tuple[MetricSpec, ...]
    # Percent per group; groups not listed share what is left of 100 equally.
    group_weights: Mapping[str, float]
    confidence: float = 0.95
    pass_threshold: float = 95.0
    marginal_threshold: float = 75.0
    # What must exceed the allowed change: the interval's near bound ("interval": the canary
    # is worse by more than allowed, with confidence) or, as Kayenta, the point estimate
    # ("estimate": more sensitive, and more false fails when two hosts differ slightly).
    gate: Literal["interval", "estimate"] = "interval"
    # How per-request samples with clusters (the interval each was sent in) are judged:
    # "cluster-bootstrap" (dependent.py), "design-effect" (Mann-Whitney widened by the
    # clusters' design effect, issue 21) or "independent" (Mann-Whitney, clusters ignored).
    method: Method = "cluster-bootstrap"
    resamples: int = 1000
    block: int = 0          # moving-block length in intervals; 0: about intervals^(1/3)
    seed: int = 0           # the bootstrap's generator, so a verdict is reproducible
    # Normalise per-request samples for prompt/output length when the sides' mixes differ.
    adjust_lengths: bool = True

    def __post_init__(self) -> None:
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence must be in (0, 1), not {self.confidence}")
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, not {self.method!r}")
        if self.resamples < 100:
            raise ValueError(f"resamples must be >= 100, not {self.resamples}")
        if self.block < 0:
            raise ValueError(f"block must be >= 0, not {self.block}")
        names = [m.name for m in self.metrics]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate metric names: {', '.join(duplicates)}")


@dataclass(frozen=True, slots=True)
class MetricResult:
    """One metric's comparison. Sample counts are after NaN handling; ``shift`` is the
    Hodges-Lehmann estimate of canary - baseline and [``ci_low``, ``ci_high``] its confidence
    interval; ``effect`` is the ratio (median_baseline + shift) / median_baseline, or the
    absolute shift when the metric has ``allowed_absolute``, and ``effect_ci`` the same of the
    interval's bounds."""

    name: str
    group: str
    verdict: Verdict
    critical: bool
    n_baseline: int
    n_canary: int
    n_nan_baseline: int
    n_nan_canary: int
    median_baseline: float
    median_canary: float
    mean_baseline: float
    mean_canary: float
    shift: float
    ci_low: float
    ci_high: float
    p_value: float
    effect: float
    effect_ci: tuple[float, float]
    reason: str
    # How much the samples' clustering in time widens the interval (variance ratio, >= 1):
    # 1.0 for independent samples or when no clusters were given.
    design_effect: float = 1.0
    # How it was judged: "mann-whitney" (samples taken as independent), "design-effect",
    # "cluster-bootstrap"; and, when the length mixes differed, how it was normalised.
    method: str = "mann-whitney"
    length_note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: enums as their values, NaN as None."""
        return {
            "name": self.name,
            "group": self.group,
            "verdict": self.verdict.value,
            "critical": self.critical,
            "n_baseline": self.n_baseline,
            "n_canary": self.n_canary,
            "n_nan_baseline": self.n_nan_baseline,
            "n_nan_canary": self.n_nan_canary,
            "median_baseline": _json_float(self.median_baseline),
            "median_canary": _json_float(self.median_canary),
            "mean_baseline": _json_float(self.mean_baseline),
            "mean_canary": _json_float(self.mean_canary),
            "shift": _json_float(self.shift),
            "ci_low": _json_float(self.ci_low),
            "ci_high": _json_float(self.ci_high),
            "p_value": _json_float(self.p_value),
            "effect": _json_float(self.effect),
            "effect_ci": [_json_float(v) for v in self.effect_ci],
            "reason": self.reason,
            "design_effect": self.design_effect,
            "method": self.method,
            "length_adjusted": bool(self.length_note),
            "length_note": self.length_note,
        }


@dataclass(frozen=True, slots=True)
class Judgement:
    """The run's verdict: per-metric results, per-group scores (percent of metrics with data
    that passed), the weighted score and the outcome."""

    results: tuple[MetricResult, ...]
    group_scores: dict[str, float]
    score: float
    critical_failures: tuple[str, ...]
    outcome: Outcome

    @property
    def methods(self) -> dict[str, list[str]]:
        """Method -> the judged metrics it judged."""
        found: dict[str, list[str]] = {}
        for r in self.results:
            if r.verdict is not Verdict.NODATA:
                found.setdefault(r.method, []).append(r.name)
        return found

    @property
    def notes(self) -> list[str]:
        """What the verdict adjusted for: one line per metric whose length mix differed."""
        return [f"{r.name}: {r.length_note}" for r in self.results if r.length_note]

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "score": self.score,
            "critical_failures": list(self.critical_failures),
            "group_scores": dict(self.group_scores),
            "methods": self.methods,
            "notes": self.notes,
            "results": [r.to_dict() for r in self.results],
        }

    def format(self) -> str:
        """A plain-text report: the outcome, one line per metric, the methods that judged
        them, a note per length-normalised metric, the group scores."""
        header = f"canary {self.outcome.value.upper()}: score {self.score:.1f}"
        if self.critical_failures:
            header += f" (critical failure: {', '.join(self.critical_failures)})"
        width = max((len(r.name) for r in self.results), default=0)
        lines = [header]
        for r in self.results:
            effect = (f"effect {_num(r.effect)} [{_num(r.effect_ci[0])}, {_num(r.effect_ci[1])}]"
                      if r.verdict is not Verdict.NODATA else "effect -")
            p = f"p={_p(r.p_value)}" if not math.isnan(r.p_value) else "p=-"
            lines.append(
                f"  {r.name:<{width}}  {r.verdict.value.upper():<6}"
                f"  n={r.n_canary}/{r.n_baseline}"
                f"  median {_num(r.median_canary)} vs {_num(r.median_baseline)}"
                f"  {effect}  {p}  {r.reason}")
        if self.methods:
            lines.append("methods: " + "; ".join(
                f"{METHOD_WORDS.get(m, m)} ({', '.join(names)})"
                for m, names in self.methods.items()))
        lines.extend(f"note: {note}" for note in self.notes)
        groups = ", ".join(f"{g} {s:.1f}" for g, s in self.group_scores.items())
        lines.append(f"group scores: {groups or 'none (no data)'}")
        return "\n".join(lines)


METHOD_WORDS = {
    "mann-whitney": "Mann-Whitney, samples as independent",
    "design-effect": "Mann-Whitney widened by the intervals' design effect",
    "design-effect-few": "Mann-Whitney widened by the design effect (too few intervals for "
                         "a bootstrap)",
    "cluster-bootstrap": "cluster bootstrap over intervals",
}


def compare(baseline: Samples, canary: Samples, spec: MetricSpec,
            confidence: float = 0.95,
            gate: Literal["interval", "estimate"] = "interval",
            clusters: tuple[Sequence[int], Sequence[int]] | None = None,
            *, method: Method = "design-effect", resamples: int = 1000, block: int = 0,
            seed: int = 0,
            lengths: tuple[LengthRows, LengthRows] | None = None) -> MetricResult:
    """Classify ``canary`` against ``baseline`` for one metric.

    1. Non-finite samples are removed or replaced by 0.0 (``spec.nan_strategy``). If either
       side is then empty: NODATA.
    2. If both sorted samples are identical, or every value on both sides is one and the same:
       PASS (shift 0, effect 1.0, or 0.0 for an absolute effect).
    3. Two-sided Mann-Whitney U test (the p-value), the Hodges-Lehmann shift of canary -
       baseline and its distribution-free confidence interval at ``confidence``. The change
       is significant when the interval excludes 0 (about p < 1 - confidence). Samples too
       few for any interval at ``confidence`` (3 against 3 at 95%: a run of a few intervals)
       PASS: nothing can be significant. With ``clusters`` (baseline's, canary's: a label per
       sample, such as the interval of the request it came from) the samples are not taken
       as independent: the interval's variance is multiplied by the design effect, the
       ratio of the Mann-Whitney statistic's cluster-robust variance to its independent one
       (at least 1), and the p-value adjusted alike. Latencies of requests that shared a
       stall of their server, and the many ITL gaps of one request, are one piece of
       evidence each, not dozens (issue 21). That is ``method`` "design-effect", the
       default of a direct call; "independent" ignores the clusters; "cluster-bootstrap"
       (the judge configuration's default) replaces the Mann-Whitney interval by a moving-
       block bootstrap over the clusters of the canary/baseline ratio of geometric means
       (``dependent.cluster_bootstrap``; the shift reported is then the baseline median
       times the ratio - 1), falling back to the design effect below ``MIN_CLUSTERS``
       clusters. With ``lengths`` (each sample's prompt and output tokens) whose mixes
       differ between the sides, the samples are first normalised for their lengths
       (``dependent.length_mix``) and the reason says so.
    4. HIGH when the direction is increase or either, the interval's lower bound is > 0 and
       the effect exceeds ``allowed_increase`` (absolute: shift > ``allowed_absolute``). LOW
       symmetrically: direction decrease or either, upper bound < 0 and the effect below
       ``allowed_decrease`` (absolute: shift < -``allowed_absolute``). With ``gate``
       "interval" the effect judged is that of the interval's bound nearest to no change
       (the lower bound of an increase), with "estimate" the point estimate (Kayenta). A
       ratio effect is undefined when the baseline median is 0; a significant change then
       exceeds any ratio. Otherwise PASS: no significant change, a change within the allowed
       one, or a change in the harmless direction.
    """
    b, nan_b, b_groups, b_len = _clean(baseline, spec.nan_strategy, clusters and clusters[0],
                                       lengths and lengths[0], "baseline")
    c, nan_c, c_groups, c_len = _clean(canary, spec.nan_strategy, clusters and clusters[1],
                                       lengths and lengths[1], "canary")
    median_b, median_c = _median(b), _median(c)
    mean_b, mean_c = _mean(b), _mean(c)
    absolute = spec.allowed_absolute is not None
    clustered = b_groups is not None and c_groups is not None and method != "independent"
    used = "mann-whitney"
    length_note = ""

    def result(verdict: Verdict, shift: float, ci: tuple[float, float], p: float,
               effect: float, effect_ci: tuple[float, float], reason: str) -> MetricResult:
        return MetricResult(
            name=spec.name, group=spec.group, verdict=verdict, critical=spec.critical,
            n_baseline=int(b.size), n_canary=int(c.size),
            n_nan_baseline=nan_b, n_nan_canary=nan_c,
            median_baseline=median_b, median_canary=median_c,
            mean_baseline=mean_b, mean_canary=mean_c,
            shift=shift, ci_low=ci[0], ci_high=ci[1], p_value=p,
            effect=effect, effect_ci=effect_ci, reason=reason, design_effect=deff,
            method=used, length_note=length_note)

    deff = 1.0

    nan = math.nan
    if b.size == 0 or c.size == 0:
        dropped = f", {nan_c}/{nan_b} non-finite removed" if nan_c or nan_b else ""
        return result(Verdict.NODATA, nan, (nan, nan), nan, nan, (nan, nan),
                      f"no data (n={c.size}/{b.size}{dropped}): nodata")

    head = (f"canary median {_num(median_c)} vs baseline {_num(median_b)} "
            f"(n={c.size}/{b.size})")
    if np.array_equal(b, c) or b[0] == b[-1] == c[0] == c[-1]:
        same = 0.0 if absolute else 1.0
        what = ("all values are " + _num(float(b[0])) if b[0] == b[-1] == c[0] == c[-1]
                else "identical samples")
        return result(Verdict.PASS, 0.0, (0.0, 0.0), 1.0, same, (same, same),
                      f"{head}: {what}: pass")

    reference = median_b   # what a ratio effect is relative to
    if b_len is not None and c_len is not None:
        adjusted = length_mix(b, c, b_len, c_len, spec.name)
        if adjusted.adjusted:
            length_note = adjusted.note
            b, b_groups = _resort(adjusted.baseline, b_groups)
            c, c_groups = _resort(adjusted.canary, c_groups)
            reference = _median(b)
            head += " after length normalisation"
    suffix = f"; {length_note}" if length_note else ""

    groups_ok = b_groups is not None and c_groups is not None
    if (clustered and groups_ok and method == "cluster-bootstrap"
            and (absolute or reference > 0)):
        assert b_groups is not None and c_groups is not None
        count = np.unique(np.concatenate([b_groups, c_groups])).size
        if count >= MIN_CLUSTERS:
            used = "cluster-bootstrap"
            boot = cluster_bootstrap(b, c, b_groups, c_groups, confidence, absolute,
                                     resamples, block, seed, spec.name)
            if boot.scale == "absolute":
                shift, ci_low, ci_high = boot.estimate, boot.low, boot.high
            else:
                shift, ci_low, ci_high = (reference * math.expm1(v)
                                          for v in (boot.estimate, boot.low, boot.high))
            effect = _effect(shift, reference, spec.allowed_absolute)
            effect_ci = (_effect(ci_low, reference, spec.allowed_absolute),
                         _effect(ci_high, reference, spec.allowed_absolute))
            verdict, why = _classify(spec, shift, ci_low, ci_high, effect, reference, gate)
            reason = (f"{head}: shift {_num(shift, sign=True)} [{_num(ci_low, sign=True)}, "
                      f"{_num(ci_high, sign=True)}] at {confidence * 100:g}% by "
                      f"{boot.describe()}, {why}, p={_p(boot.p_value)}: "
                      f"{verdict.value}{suffix}")
            return result(verdict, shift, (ci_low, ci_high), boot.p_value, effect, effect_ci,
                          reason)
        used = "design-effect-few"

    p_value = float(stats.mannwhitneyu(c, b, alternative="two-sided").pvalue)
    if clustered and groups_ok:
        assert b_groups is not None and c_groups is not None
        used = "design-effect" if used == "mann-whitney" else used
        deff = design_effect(b, c, b_groups, c_groups)
        # The same z, over a standard error sqrt(deff) times wider.
        p_value = float(2 * stats.norm.sf(stats.norm.isf(p_value / 2) / math.sqrt(deff)))
    shift, ci_low, ci_high = _hodges_lehmann_sorted(b, c, confidence, deff)
    effect = _effect(shift, reference, spec.allowed_absolute)
    effect_ci = (_effect(ci_low, reference, spec.allowed_absolute),
                 _effect(ci_high, reference, spec.allowed_absolute))
    if _interval_rank(int(b.size), int(c.size), confidence, deff) < 1:
        # The widest interval there is, [min, max] of the differences, holds less than the
        # confidence asked (3 against 3 all higher is p=0.1): it cannot gate a verdict.
        verdict, why = Verdict.PASS, (f"too few samples for a {confidence * 100:g}% interval "
                                      f"(the widest, [min, max], has less)")
    else:
        verdict, why = _classify(spec, shift, ci_low, ci_high, effect, reference, gate)
    widened = f" (widened x{math.sqrt(deff):.2g} for clustering)" if deff > 1 else ""
    reason = (f"{head}: shift {_num(shift, sign=True)} [{_num(ci_low, sign=True)}, "
              f"{_num(ci_high, sign=True)}] at {confidence * 100:g}%{widened}, {why}, "
              f"p={_p(p_value)}: {verdict.value}{suffix}")
    return result(verdict, shift, (ci_low, ci_high), p_value, effect, effect_ci, reason)


def hodges_lehmann(baseline: Samples, canary: Samples,
                   confidence: float = 0.95) -> tuple[float, float, float]:
    """The Hodges-Lehmann estimate of the shift canary - baseline (the median of all pairwise
    differences) and its distribution-free confidence interval, as R's ``wilcox.test(canary,
    baseline, conf.int=TRUE)`` with the normal approximation and ties ignored:
    [d_(k), d_(nm-k+1)] with k = floor(nm/2 - z * sqrt(nm(n+m+1)/12)). Both samples must be
    finite and non-empty."""
    b = np.sort(np.asarray(baseline, dtype=np.float64).ravel())
    c = np.sort(np.asarray(canary, dtype=np.float64).ravel())
    if b.size == 0 or c.size == 0:
        raise ValueError("both samples must be non-empty")
    if not (np.isfinite(b).all() and np.isfinite(c).all()):
        raise ValueError("samples must be finite")
    return _hodges_lehmann_sorted(b, c, confidence)


def judge(baseline: Mapping[str, Samples], canary: Mapping[str, Samples],
          config: JudgeConfig,
          clusters: tuple[Mapping[str, Sequence[int]], Mapping[str, Sequence[int]]]
          | None = None,
          lengths: tuple[Mapping[str, LengthRows], Mapping[str, LengthRows]]
          | None = None) -> Judgement:
    """Compare every configured metric (one missing from a mapping has no samples) and score
    the run.

    Group score: 100 * pass / (pass + high + low); a group whose metrics are all NODATA has
    no score. Run score: the group scores weighted by ``config.group_weights`` (groups not
    listed share the rest of 100 equally), over the groups with a score, so a group without
    data neither helps nor hurts; 0 when there is a critical failure or no group has data.
    Critical failures: a critical metric that is HIGH or LOW, or NODATA on a critical or
    must-have-data metric. ``clusters`` (each per-request sample's interval) select the
    configured ``method`` for those metrics; ``lengths`` (each per-request sample's prompt
    and output tokens) let the judge normalise for a differing length mix. Outcome: FAIL
    on a critical failure or a score below the marginal
    threshold, MARGINAL below the pass threshold, else PASS.
    """
    def labels(name: str) -> tuple[Sequence[int], Sequence[int]] | None:
        if clusters is None or name not in clusters[0] or name not in clusters[1]:
            return None
        return clusters[0][name], clusters[1][name]

    def rows(name: str) -> tuple[LengthRows, LengthRows] | None:
        if (lengths is None or not config.adjust_lengths or name not in lengths[0]
                or name not in lengths[1]):
            return None
        return lengths[0][name], lengths[1][name]

    results = tuple(
        compare(baseline.get(spec.name, ()), canary.get(spec.name, ()), spec,
                config.confidence, config.gate, labels(spec.name), method=config.method,
                resamples=config.resamples, block=config.block, seed=config.seed,
                lengths=rows(spec.name))
        for spec in config.metrics)
    return _score(results, config)


def _score(results: tuple[MetricResult, ...], config: JudgeConfig) -> Judgement:
    specs = {spec.name: spec for spec in config.metrics}
    counts: dict[str, list[int]] = {}  # group -> [pass, judged]
    for r in results:
        tally = counts.setdefault(r.group, [0, 0])
        if r.verdict is not Verdict.NODATA:
            tally[0] += r.verdict is Verdict.PASS
            tally[1] += 1
    group_scores = {g: 100.0 * passed / judged
                    for g, (passed, judged) in counts.items() if judged}

    unlisted = [g for g in counts if g not in config.group_weights]
    share = (max(0.0, 100.0 - sum(config.group_weights.values())) / len(unlisted)
             if unlisted else 0.0)
    weights = {g: config.group_weights.get(g, share) for g in group_scores}
    total = sum(weights.values())
    if not group_scores:
        score = 0.0
    elif total > 0:
        score = sum(group_scores[g] * w for g, w in weights.items()) / total
    else:  # every group with data has weight 0: weigh them alike
        score = sum(group_scores.values()) / len(group_scores)

    critical = tuple(
        r.name for r in results
        if (r.critical and r.verdict in (Verdict.HIGH, Verdict.LOW))
        or (r.verdict is Verdict.NODATA and (r.critical or specs[r.name].must_have_data)))
    # Rounded as Kayenta does, so that float noise cannot move a score across a threshold.
    score = 0.0 if critical else round(score, 2)
    if critical or score < config.marginal_threshold:
        outcome = Outcome.FAIL
    elif score < config.pass_threshold:
        outcome = Outcome.MARGINAL
    else:
        outcome = Outcome.PASS
    return Judgement(results, group_scores, score, critical, outcome)


def _classify(spec: MetricSpec, shift: float, ci_low: float, ci_high: float, effect: float,
              median_baseline: float,
              gate: Literal["interval", "estimate"] = "interval") -> tuple[Verdict, str]:
    """The verdict of step 4 of ``compare`` and the clause that explains it."""
    up, down = ci_low > 0, ci_high < 0
    if not (up or down):
        shown = _effect_clause(spec, effect)
        return Verdict.PASS, f"{shown}, interval includes 0"
    bad = (spec.direction in (Direction.INCREASE, Direction.EITHER) if up
           else spec.direction in (Direction.DECREASE, Direction.EITHER))
    by_bound = gate == "interval"
    judged_shift = (ci_low if up else ci_high) if by_bound else shift
    judged = _effect(judged_shift, median_baseline, spec.allowed_absolute)
    if spec.allowed_absolute is not None:
        limit = spec.allowed_absolute
        exceeded = judged_shift > limit if up else judged_shift < -limit
        word = f"{'>' if exceeded else 'within'} allowed {'+' if up else '-'}{_num(limit)}"
        bound = f" (interval bound {_num(judged, sign=True)})" if by_bound else ""
        shown = f"effect {_num(effect, sign=True)}{bound} {word}"
    elif median_baseline == 0:
        exceeded = True
        shown = "effect undefined (baseline median 0)"
    else:
        limit = spec.allowed_increase if up else spec.allowed_decrease
        exceeded = judged > limit if up else judged < limit
        sign = (">" if up else "<") if exceeded else "within"
        bound = f" (interval bound {_num(judged)})" if by_bound else ""
        shown = f"effect {_num(effect)}{bound} {sign} allowed {_num(limit)}"
    if not bad:
        return Verdict.PASS, f"{shown}, {'an increase' if up else 'a decrease'} is harmless"
    if not exceeded:
        return Verdict.PASS, shown
    return (Verdict.HIGH if up else Verdict.LOW), shown


def _effect_clause(spec: MetricSpec, effect: float) -> str:
    if math.isnan(effect):
        return "effect undefined (baseline median 0)"
    return f"effect {_num(effect, sign=spec.allowed_absolute is not None)}"


def _hodges_lehmann_sorted(b: FloatArray, c: FloatArray, confidence: float,
                           deff: float = 1.0) -> tuple[float, float, float]:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), not {confidence}")
    n, m = int(b.size), int(c.size)
    nm = n * m
    # Too few pairs for this confidence: the widest interval there is (compare then does not
    # judge by it).
    k = max(_interval_rank(n, m, confidence, deff), 1)
    # 1-based ranks of the order statistics wanted: the interval's and the median's.
    ranks = (k, nm - k + 1, (nm + 1) // 2, nm // 2 + 1)
    if nm <= EXACT_PAIRS_LIMIT:
        diffs = np.subtract.outer(c, b).ravel()
        idx = sorted({r - 1 for r in ranks})
        part = np.partition(diffs, idx)
        lo, hi, mid_a, mid_b = (float(part[r - 1]) for r in ranks)
    else:
        span = float(max(b[-1], c[-1]) - min(b[0], c[0]))
        lo, hi, mid_a, mid_b = (_kth_difference(b, c, r, BISECT_RTOL * span) for r in ranks)
    return (mid_a + mid_b) / 2, lo, hi


def _interval_rank(n: int, m: int, confidence: float, deff: float = 1.0) -> int:
    """k of the interval [d_(k), d_(nm-k+1)] (normal approximation, the statistic's
    variance times the design effect ``deff``); < 1 when n and m are too few for any
    interval at ``confidence`` (3 and 3 at 95%, 4 and 4 suffice)."""
    nm = n * m
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    return math.floor(nm / 2 - z * math.sqrt(deff * nm * (n + m + 1) / 12))


def design_effect(b: FloatArray, c: FloatArray, b_groups: npt.NDArray[np.int64],
                  c_groups: npt.NDArray[np.int64]) -> float:
    """The variance of the Mann-Whitney statistic (as P(canary > baseline)) with samples
    correlated within their cluster, over its variance for independent samples; at least 1.

    Both from the placements (DeLong): each canary sample's share of baseline samples below
    it and each baseline sample's share of canary samples above it (ties half), whose mean
    deviations sum to the statistic's. The robust variance sums the deviations per cluster
    before squaring (G/(G-1) small-sample factor). A label names the same cluster on both
    sides (the same interval of a paired run): a stall of the machine that slows both
    sides' requests in an interval moves the two sums in opposite directions and cancels,
    as it should; only what differs between the sides counts. 1.0 when there are fewer than
    2 clusters (nothing to estimate it from) or the placements do not vary. ``b`` and ``c``
    sorted, groups aligned with them."""
    n, m = b.size, c.size
    if n < 2 or m < 2:
        return 1.0
    v10 = (np.searchsorted(b, c, "left") + np.searchsorted(b, c, "right")) / (2.0 * n)
    v01 = 1.0 - (np.searchsorted(c, b, "left") + np.searchsorted(c, b, "right")) / (2.0 * m)
    theta = float(v10.mean())
    independent = float(np.var(v10, ddof=1) / m + np.var(v01, ddof=1) / n)
    labels, index = np.unique(np.concatenate([c_groups, b_groups]), return_inverse=True)
    g = labels.size
    if g < 2 or not independent > 0:
        return 1.0
    deviations = np.concatenate([(v10 - theta) / m, (v01 - theta) / n])
    sums = np.bincount(index, weights=deviations, minlength=g)
    robust = float(g / (g - 1) * np.sum(sums ** 2))
    return max(1.0, robust / independent)


def _kth_difference(b: FloatArray, c: FloatArray, k: int, tol: float) -> float:
    """The k-th smallest (1-based) of the differences c_j - b_i of sorted ``b`` and ``c``,
    without materialising them: bisection on d over the count of pairs with c_j - b_i <= d,
    which is O((n + m) log m) with the samples sorted."""

    def count(d: float) -> int:
        return int(np.searchsorted(c, b + d, side="right").sum())

    lo, hi = float(c[0] - b[-1]), float(c[-1] - b[0])
    if count(lo) >= k:
        return lo
    # Invariant: count(lo) < k <= count(hi), so the k-th difference lies in (lo, hi].
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:  # the bracket is down to adjacent floats
            break
        if count(mid) >= k:
            hi = mid
        else:
            lo = mid
    # Snap to the smallest actual difference above lo: it lies in (lo, hi], within the
    # tolerance, and is the k-th one itself unless several differences crowd the bracket.
    j = np.searchsorted(c, b + lo, side="right")
    inside = j < c.size
    if not inside.any():
        return hi
    return min(float(np.min(c[j[inside]] - b[inside])), hi)


def _effect(shift: float, median_baseline: float, allowed_absolute: float | None) -> float:
    if allowed_absolute is not None:
        return shift
    if median_baseline == 0:
        return math.nan
    return (median_baseline + shift) / median_baseline


def _clean(values: Samples, strategy: str, groups: Sequence[int] | None = None,
           lengths: LengthRows | None = None, side: str = "samples"
           ) -> tuple[FloatArray, int, npt.NDArray[np.int64] | None, FloatArray | None]:
    """The samples sorted, as a float array after the NaN strategy; how many were
    non-finite; their cluster labels and length rows in the same order (None without
    ``groups``, ``lengths``)."""
    arr = np.array(values, dtype=np.float64).ravel()
    labels = None if groups is None else np.asarray(groups, dtype=np.int64).ravel()
    if labels is not None and labels.size != arr.size:
        raise ValueError(f"{labels.size} cluster labels for {arr.size} samples")
    rows = None if lengths is None else lengths_array(lengths, arr.size, side)
    bad = ~np.isfinite(arr)
    n_bad = int(bad.sum())
    if n_bad:
        if strategy == "replace":
            arr = np.where(bad, 0.0, arr)
        else:
            arr = arr[~bad]
            labels = None if labels is None else labels[~bad]
            rows = None if rows is None else rows[~bad]
    order = np.argsort(arr, kind="stable")
    return (arr[order], n_bad, None if labels is None else labels[order],
            None if rows is None else rows[order])


def _resort(values: FloatArray, labels: npt.NDArray[np.int64] | None
            ) -> tuple[FloatArray, npt.NDArray[np.int64] | None]:
    order = np.argsort(values, kind="stable")
    return values[order], None if labels is None else labels[order]


def _median(arr: FloatArray) -> float:
    return float(np.median(arr)) if arr.size else math.nan


def _mean(arr: FloatArray) -> float:
    return float(np.mean(arr)) if arr.size else math.nan


def _json_float(value: float) -> float | None:
    return None if math.isnan(value) else value


def _num(value: float, sign: bool = False) -> str:
    """3 significant digits, in plain notation from 0.001 to 1e6 (231, 0.0198, 1000), else
    with an unpadded exponent (2e-9)."""
    if math.isnan(value):
        return "-"
    plus = "+" if sign else ""
    value = value or 0.0  # no "-0"
    if value == 0 or 1e-3 <= abs(value) < 1e6:
        digits = max(0, 2 - math.floor(math.log10(abs(value)))) if value else 0
        text = f"{value:{plus}.{digits}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{value:{plus}.3g}".replace("e-0", "e-").replace("e+0", "e+")


def _p(value: float) -> str:
    return f"{value:.2g}".replace("e-0", "e-").replace("e+0", "e+")
