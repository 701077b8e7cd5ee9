"""The anomaly detectors on public labelled real-world series: the NAB corpus.

    python -m bench.anomaly_nab [--json out.json] [--groups realTweets,...]

Series: numenta/NAB's realTraffic, realAdExchange, realTweets and artificial series (34 files,
5-minute steps mostly, one to eight weeks each), stored gzipped under bench/data/nab/ with
NAB's labelled windows (see its README). NAB's realKnownCause and realAWSCloudwatch series
are kept back, untouched, for an independent check of the product: nothing here reads or
tunes on them.

Each file is scored exactly as ``inferwatch anomaly score`` scores it (the timestamp policy of
``monitor.anomaly.timeline``, the step from the file, the calibrated detector of
``monitor.anomaly.calibrated`` with its defaults, both directions, no load). Reported per
group and overall:
- NAB normalized scores (null 0, perfect 100) of the alert starts, of the anomaly score with
  NAB's optimized threshold, and of NAB's random detector;
- per labelled window: recall, precision of alert starts, median delay;
- false alerts per series-week: alert starts outside every window (after NAB's probation),
  over the weeks outside windows;
- how the score ranks: the share of rows tied at the top score (saturation), and the share of
  the top 1% of scores that fall inside windows.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from monitor.anomaly import nab, timeline
from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.series import RowScores, score_timeline
from monitor.timeparse import parse_timestamp

DATA = Path(__file__).parent / "data" / "nab"
GROUPS = ("artificialNoAnomaly", "artificialWithAnomaly", "realAdExchange", "realTraffic",
          "realTweets")
WEEK = 7 * 86400.0


@dataclass(frozen=True, slots=True)
class Series:
    name: str                       # group/file.csv, as NAB names it
    times: npt.NDArray[np.float64]
    values: npt.NDArray[np.float64]
    windows: list[nab.Window]


@dataclass(frozen=True, slots=True)
class Scored:
    series: Series
    rows: RowScores
    step: float


@dataclass(frozen=True, slots=True)
class GroupResult:
    group: str
    series: int
    rows: int
    windows: int
    nab_alerts: dict[str, float]           # profile -> normalized (NaN without windows)
    nab_scores: dict[str, float]
    nab_random: dict[str, float]
    recall: float
    precision: float
    median_delay_steps: float
    alerts: int
    false_alerts: int
    false_alerts_per_week: float
    top_tied_share: float                  # rows sharing the top score value
    top_percent_in_windows: float          # of the top 1% of scores, the share in windows


def load(name: str, windows: Sequence[Sequence[str]]) -> Series:
    with gzip.open(DATA / f"{name}.gz", "rt", newline="") as f:
        rows = list(csv.reader(io.StringIO(f.read())))[1:]
    times = np.array([parse_timestamp(r[0]) for r in rows])
    values = np.array([float(r[1]) for r in rows])
    return Series(name, times, values, [_window(times, w) for w in windows])


def _window(times: npt.NDArray[np.float64], bounds: Sequence[str]) -> nab.Window:
    start, end = (parse_timestamp(datetime.fromisoformat(b).isoformat()) for b in bounds)
    first = int(np.searchsorted(times, start))
    last = int(np.searchsorted(times, end, side="right")) - 1
    return nab.Window(first, last, (first + last) // 2)


def corpus(groups: Sequence[str] = GROUPS) -> list[Series]:
    labels = json.loads((DATA / "combined_windows.json").read_text())
    return [load(name, windows) for name, windows in sorted(labels.items())
            if name.split("/")[0] in groups]


def score(series: Series) -> Scored:
    line = timeline.build(series.times, series.values)
    return Scored(series, score_timeline(line, AnomalyParams(step_seconds=line.step)),
                  line.step)


def group_result(group: str, scored: Sequence[Scored], seed: int = 0) -> GroupResult:
    labelled = [(s.rows.starts, s.series.windows) for s in scored]
    has_windows = any(w for _, w in labelled)
    nab_alerts, nab_scores, nab_random = {}, {}, {}
    for name, profile in nab.PROFILES.items():
        if not has_windows:
            nab_alerts[name] = nab_scores[name] = nab_random[name] = math.nan
            continue
        nab_alerts[name] = nab.normalized([nab.score_series(a, w, profile) for a, w in labelled])
        nab_scores[name] = nab.optimize_threshold(
            [(s.rows.scores, s.series.windows) for s in scored], profile)[1]
        nab_random[name] = nab.optimize_threshold(
            [(nab.random_scores(len(s.rows.scores), seed + k), s.series.windows)
             for k, s in enumerate(scored)], profile)[1]
    windows = detected = alerts = true_alerts = false_alerts = 0
    delays: list[int] = []
    outside_weeks = 0.0
    tied = top_in = top_total = 0
    for s in scored:
        n = len(s.rows.starts)
        probation = nab.probationary_length(n)
        m = nab.window_metrics(s.rows.starts, s.series.windows, n=n, probation=probation)
        windows += m.windows
        detected += m.detected
        alerts += m.alerts
        true_alerts += m.true_alerts
        false_alerts += m.false_alerts
        delays += [d for d in m.delays if d is not None]
        inside = np.zeros(n, dtype=bool)
        for w in s.series.windows:
            inside[w.start:w.end + 1] = True
        outside_weeks += np.count_nonzero(~inside[probation:]) * s.step / WEEK
        scores = s.rows.scores[probation:]
        tied += int(np.count_nonzero(scores == scores.max()))
        top = np.argsort(-scores, kind="stable")[:max(1, len(scores) // 100)]
        top_in += int(np.count_nonzero(inside[probation:][top]))
        top_total += len(top)
    rows = sum(len(s.rows.starts) for s in scored)
    return GroupResult(
        group, len(scored), rows, windows, nab_alerts, nab_scores, nab_random,
        detected / windows if windows else math.nan,
        true_alerts / alerts if alerts else math.nan,
        float(np.median(delays)) if delays else math.nan,
        alerts, false_alerts, false_alerts / outside_weeks if outside_weeks else math.nan,
        tied / rows, top_in / top_total if top_total else math.nan)


def run(groups: Sequence[str] = GROUPS) -> tuple[list[GroupResult], float]:
    series = corpus(groups)
    started = time.perf_counter()
    scored = [score(s) for s in series]
    elapsed = time.perf_counter() - started
    results = [group_result(g, [s for s in scored if s.series.name.startswith(g + "/")])
               for g in groups]
    real = [s for s in scored if s.series.name.startswith("real")]
    results.append(group_result("real (all three)", real))
    results.append(group_result("all", scored))
    return results, elapsed / sum(len(s.rows.starts) for s in scored) * 1e6


def _f(value: float, digits: int = 1) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", default=",".join(GROUPS))
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    results, us_per_row = run(args.groups.split(","))
    print(f"scoring {us_per_row:.0f} us per row (one core)\n")
    print(f"{'group':<22}{'series':>7}{'windows':>8}{'NAB std':>8}{'low FP':>8}{'low FN':>8}"
          f"{'score+thr':>10}{'random':>8}{'recall':>7}{'prec':>6}{'delay':>6}{'alerts':>7}"
          f"{'FA/week':>8}{'tied':>7}{'top1%in':>8}")
    for r in results:
        print(f"{r.group:<22}{r.series:>7}{r.windows:>8}{_f(r.nab_alerts['standard']):>8}"
              f"{_f(r.nab_alerts['reward_low_fp_rate']):>8}"
              f"{_f(r.nab_alerts['reward_low_fn_rate']):>8}{_f(r.nab_scores['standard']):>10}"
              f"{_f(r.nab_random['standard']):>8}{_f(r.recall, 2):>7}{_f(r.precision, 2):>6}"
              f"{_f(r.median_delay_steps, 0):>6}{r.alerts:>7}{_f(r.false_alerts_per_week):>8}"
              f"{_f(100 * r.top_tied_share, 2):>6}%{_f(100 * r.top_percent_in_windows, 0):>7}%")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2))


if __name__ == "__main__":
    main()
