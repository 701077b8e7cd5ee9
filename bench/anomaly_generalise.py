"""Which anomaly detector generalises: every candidate on every corpus and split, tuned on one
part and reported on the others.

    python -m bench.anomaly_generalise [--candidates current,spot,...] [--corpora nab,smd,...]
                                       [--rates 0.5,1,2] [--cooldowns 1,6] [--json out.json]
                                       [--markdown out.md]

For each candidate (``bench.anomaly_candidates``) and each setting (false alerts per week its
thresholds aim for, hours without a new alert after one ends), every series of every corpus
(``bench.anomaly_corpora``) is scored as
``inferwatch anomaly score`` scores it (the timestamp policy, one row per input row), then per
corpus and per split half:
- the NAB standard score of the alert starts, and of the anomaly score with NAB's optimised
  threshold; a random detector's beside them;
- recall, precision of the alert starts, median delay (steps), false alerts per series-week;
  false alerts per series-week on incident-free series (no labelled window at all);
then, per candidate, leave one corpus out: the setting chosen on the other corpora (best mean
NAB standard score of the alert starts among the settings with at most one false alert per
series-week on their incident-free series), reported on the one left out, beside the best that
corpus alone would have chosen under the same rule (the gap).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bench import anomaly_corpora, anomaly_nab
from bench.anomaly_candidates import CANDIDATES, Setting
from monitor.anomaly import nab, timeline
from monitor.anomaly.series import RowScores

RATES = (0.5, 1.0, 2.0)
MAX_QUIET = 1.0  # the target: false alerts per series-week on incident-free series
WEEK = anomaly_nab.WEEK


@dataclass(frozen=True, slots=True)
class Cell:
    candidate: str
    alerts_per_week: float
    cooldown_hours: float
    corpus: str
    part: str                      # "all", "a" or "b"
    series: int
    windows: int
    nab_alerts: float
    nab_scores: float
    nab_random: float
    recall: float
    precision: float
    median_delay_steps: float
    false_alerts_per_week: float
    quiet_false_alerts_per_week: float   # on series without any labelled window
    seconds: float
    relative_floor: float = 0.05


def _score(job: tuple[str, Setting, anomaly_nab.Series]) -> tuple[anomaly_nab.Scored, float]:
    candidate, setting, series = job
    line = timeline.build(series.times, series.values)
    started = time.perf_counter()
    out = CANDIDATES[candidate](line.values, line.step, setting)
    elapsed = time.perf_counter() - started
    active = out.active
    starts = active & ~np.concatenate(([False], active[:-1]))
    rows = line.point_of_row
    first = line.first_row[rows] == np.arange(len(rows))
    scored = RowScores(np.nan_to_num(out.score[rows], nan=0.0), starts[rows] & first)
    return anomaly_nab.Scored(series, scored, line.step), elapsed


def _quiet_rate(scored: Sequence[anomaly_nab.Scored]) -> float:
    quiet = [s for s in scored if not s.series.windows]
    if not quiet:
        return math.nan
    alerts = weeks = 0.0
    for s in quiet:
        n = len(s.rows.starts)
        p = nab.probationary_length(n)
        alerts += int(np.count_nonzero(s.rows.starts[p:]))
        weeks += (n - p) * s.step / WEEK
    return alerts / weeks if weeks else math.nan


def cell(candidate: str, setting: Setting | None, corpus: str, part: str,
         scored: Sequence[anomaly_nab.Scored], seconds: float) -> Cell:
    g = anomaly_nab.group_result(corpus, scored)
    rate = setting.alerts_per_week if setting else math.nan
    cooldown = setting.cooldown_seconds / 3600 if setting else math.nan
    floor = setting.relative_floor if setting else 0.05
    return Cell(candidate, rate, cooldown, corpus, part, g.series, g.windows,
                g.nab_alerts["standard"],
                g.nab_scores["standard"], g.nab_random["standard"], g.recall, g.precision,
                g.median_delay_steps, g.false_alerts_per_week, _quiet_rate(scored), seconds,
                floor)


def evaluate(candidates: Sequence[str], corpora: Sequence[str], settings: Sequence[Setting],
             processes: int = 2) -> list[Cell]:
    data = {c: anomaly_corpora.load_corpus(c) for c in corpora}
    halves = {c: anomaly_corpora.splits(c) for c in corpora}
    cells: list[Cell] = []
    with multiprocessing.Pool(processes) as pool:
        for candidate in candidates:
            for setting in (settings if candidate != "current" else (None,)):
                for corpus, series in data.items():
                    results = pool.map(_score, [(candidate, setting or Setting(), s)
                                                for s in series])
                    scored = [r[0] for r in results]
                    seconds = sum(r[1] for r in results)
                    cells.append(cell(candidate, setting, corpus, "all", scored, seconds))
                    for part, names in halves[corpus].items():
                        members = set(names)
                        cells.append(cell(candidate, setting, corpus, part,
                                          [s for s in scored if s.series.name in members],
                                          math.nan))
                    print(_row(cells[-3]), flush=True)
    return cells


@dataclass(frozen=True, slots=True)
class Transfer:
    candidate: str
    held_out: str
    chosen: str                    # the setting chosen on the other corpora
    score: float                   # NAB standard (alert starts) on the held-out corpus
    own_best_setting: str
    own_best: float                # what tuning on the held-out corpus itself would give

    @property
    def gap(self) -> float:
        return self.own_best - self.score


def leave_one_out(cells: Sequence[Cell]) -> list[Transfer]:
    out = []
    whole = [c for c in cells if c.part == "all"]
    for candidate in sorted({c.candidate for c in whole}):
        mine = [c for c in whole if c.candidate == candidate]
        corpora = sorted({c.corpus for c in mine})
        rates = sorted({label(c) for c in mine})
        table = {(c.corpus, label(c)): c.nab_alerts for c in mine}

        def at(corpus: str, rate: str, table: dict[tuple[str, str], float] = table) -> float:
            return table[(corpus, rate)]

        quiet = {(c.corpus, label(c)): c.quiet_false_alerts_per_week for c in mine}

        def allowed(rate: str, corpora: Sequence[str],
                    quiet: dict[tuple[str, str], float] = quiet) -> bool:
            """At most ``MAX_QUIET`` false alerts per week on every incident-free set."""
            return all(not quiet[(c, rate)] > MAX_QUIET for c in corpora)

        for held in corpora:
            others = [c for c in corpora if c != held] or [held]
            feasible = [r for r in rates if allowed(r, others)] or rates
            chosen = max(feasible, key=lambda r: float(np.mean([at(c, r) for c in others])))
            own = max([r for r in rates if allowed(r, [held])] or rates,
                      key=lambda r: at(held, r))
            out.append(Transfer(candidate, held, chosen, at(held, chosen), own, at(held, own)))
    return out


def label(c: Cell) -> str:
    """A setting's name: ``<alerts per week>/<cooldown hours>h``, ``-`` for none."""
    if math.isnan(c.alerts_per_week):
        return "-"
    floor = f"/{c.relative_floor:g}" if c.relative_floor != 0.05 else ""
    return f"{c.alerts_per_week:g}/{c.cooldown_hours:g}h{floor}"


def _f(value: float, digits: int = 1) -> str:
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


HEADER = (f"{'candidate':<11}{'setting':>9}{'corpus':>9}{'part':>5}{'series':>7}{'windows':>8}"
          f"{'NAB std':>8}{'score+thr':>10}{'random':>7}{'recall':>7}{'prec':>6}{'delay':>6}"
          f"{'FA/wk':>7}{'quiet':>7}{'s':>7}")


def _row(c: Cell) -> str:
    return (f"{c.candidate:<11}{label(c):>9}{c.corpus:>9}{c.part:>5}"
            f"{c.series:>7}{c.windows:>8}{_f(c.nab_alerts):>8}{_f(c.nab_scores):>10}"
            f"{_f(c.nab_random):>7}{_f(c.recall, 2):>7}{_f(c.precision, 2):>6}"
            f"{_f(c.median_delay_steps, 0):>6}{_f(c.false_alerts_per_week, 2):>7}"
            f"{_f(c.quiet_false_alerts_per_week, 2):>7}{_f(c.seconds, 0):>7}")


def markdown(cells: Sequence[Cell], transfers: Sequence[Transfer]) -> str:
    """The cells (each corpus, then its halves) and the leave-one-out table as markdown."""
    lines = ["| candidate | setting | corpus | part | series | windows | NAB std (alerts) | "
             "NAB std (score, threshold swept) | random | recall | precision | median delay "
             "(steps) | FA / series-week | FA / week, incident-free | s |",
             "| --- " * 15 + "|"]
    for c in cells:
        lines.append(
            f"| {c.candidate} | {label(c)} | {c.corpus} | {c.part} | {c.series} | {c.windows} "
            f"| {_f(c.nab_alerts)} | {_f(c.nab_scores)} | {_f(c.nab_random)} "
            f"| {_f(c.recall, 2)} | {_f(c.precision, 2)} | {_f(c.median_delay_steps, 0)} "
            f"| {_f(c.false_alerts_per_week, 2)} | {_f(c.quiet_false_alerts_per_week, 2)} "
            f"| {_f(c.seconds, 0)} |")
    lines += ["", "| candidate | held out | setting chosen on the others | NAB std there | "
              "best setting there | its NAB std | gap |", "| --- " * 7 + "|"]
    for t in transfers:
        lines.append(f"| {t.candidate} | {t.held_out} | {t.chosen} | {_f(t.score)} "
                     f"| {t.own_best_setting} | {_f(t.own_best)} | {_f(t.gap)} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--corpora", default=",".join(
        c for c in anomaly_corpora.CORPORA if anomaly_corpora.available(c)))
    parser.add_argument("--rates", default=",".join(str(r) for r in RATES))
    parser.add_argument("--cooldowns", default="6",
                        help="hours without a new alert after one ends, comma-separated")
    parser.add_argument("--floors", default="0.05",
                        help="calibrated: a spread's floor as a share of the level, "
                             "comma-separated")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--markdown", type=Path, default=None,
                        help="also write the tables as markdown (docs/benchmarks.md)")
    args = parser.parse_args(argv)
    print(HEADER, flush=True)
    settings = [Setting(alerts_per_week=float(r), cooldown_seconds=float(h) * 3600,
                        relative_floor=float(f))
                for r in args.rates.split(",") for h in args.cooldowns.split(",")
                for f in args.floors.split(",")]
    cells = evaluate(args.candidates.split(","), args.corpora.split(","), settings,
                     args.processes)
    print("\nAll cells:\n" + HEADER)
    for c in cells:
        print(_row(c))
    transfers = leave_one_out(cells)
    print(f"\nLeave one corpus out (NAB standard, alert starts):\n{'candidate':<11}"
          f"{'held out':>9}{'chosen':>9}{'score':>8}{'own best':>9}{'at':>9}{'gap':>6}")
    for t in transfers:
        print(f"{t.candidate:<11}{t.held_out:>9}{t.chosen:>9}{_f(t.score):>8}"
              f"{_f(t.own_best):>9}{t.own_best_setting:>9}{_f(t.gap):>6}")
    if args.markdown:
        args.markdown.write_text(markdown(cells, transfers))
    if args.json:
        args.json.write_text(json.dumps({"cells": [asdict(c) for c in cells],
                                         "transfers": [asdict(t) for t in transfers]},
                                        indent=2))


if __name__ == "__main__":
    main()
