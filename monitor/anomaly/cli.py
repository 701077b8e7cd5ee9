"""`inferwatch anomaly score`: the detectors over a CSV of ``timestamp,value`` rows.

    inferwatch anomaly score --input series.csv --output scores.csv [--direction both]

Rows are scored as a stream (no look-ahead) and written as
``timestamp,value,anomaly_score,alert``, one row per input row in input order, with the
input's own timestamp and value text: the score in [0, 1] (0.5 at the alert threshold; it
reaches 0.5 only where an alert starts), ``alert`` 1 only on the row where an alert starts.
Thresholds are set per series for ``--alerts-per-week`` false alerts (``monitor.anomaly.
calibrated``). Timestamps are unix seconds or ISO 8601.
Repeated, backwards, missing and irregular timestamps are placed on steps by the policy of
``monitor.anomaly.timeline`` (the step is the median spacing unless ``--step`` is given), and
what it did is counted on stderr and in ``--json``. An empty value is a gap. A row that is not
a time and a number stops with its line number and what is wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import numpy as np

from monitor.anomaly import timeline
from monitor.anomaly.calibrated import CalibratedParams
from monitor.anomaly.detectors import Direction
from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.series import score_timeline
from monitor.progress import add_progress_argument, bar_for
from monitor.timeparse import parse_timestamp


class SeriesFileError(ValueError):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="anomaly_command", required=True)
    score = sub.add_parser("score", help="score a timestamp,value CSV as a stream")
    score.add_argument("--input", required=True, help="CSV with timestamp,value rows ('-': "
                       "standard input)")
    score.add_argument("--output", required=True, help="CSV to write ('-': standard output)")
    score.add_argument("--direction", choices=[d.value for d in Direction],
                       default=Direction.BOTH.value, help="which deviations are anomalies")
    score.add_argument("--alerts-per-week", type=float,
                       default=CalibratedParams().alerts_per_week, metavar="N",
                       help="the false-alert budget per series-week: the thresholds are set by "
                       "extreme-value theory so that noise crosses them at most this often "
                       "(default %(default)g; measured on incident-free series: under 1)")
    score.add_argument("--cooldown-hours", type=float,
                       default=CalibratedParams().cooldown_seconds / 3600, metavar="H",
                       help="no new alert this long after one ends (default %(default)g)")
    score.add_argument("--step", type=float, default=None,
                       help="seconds between points (default: the median spacing)")
    score.add_argument("--json", default=None, metavar="PATH",
                       help="also write a JSON summary: the step, the alerts and what the "
                       "timestamp policy did ('-': standard output, when --output is a file)")
    add_progress_argument(score)


@dataclass(frozen=True, slots=True)
class SeriesFile:
    """The rows of a series file in input order: their own text and their parsed values."""

    stamps: list[str]
    value_texts: list[str]
    times: list[float]
    values: list[float]


def run(args: argparse.Namespace) -> int:
    if args.json == "-" and args.output == "-":
        print("inferwatch anomaly score: --json - and --output - both want standard output",
              file=sys.stderr)
        return 2
    try:
        rows = _read(args.input)
        line = timeline.build(rows.times, rows.values, args.step)
        params = AnomalyParams(step_seconds=line.step)
        with bar_for(args, len(line.values), "scoring", unit="step") as bar:
            scored = score_timeline(line, params, Direction(args.direction), bar,
                                    _calibration(args))
        with _open_out(args.output) as out:
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(["timestamp", "value", "anomaly_score", "alert"])
            for k, (score, start) in enumerate(zip(scored.scores.tolist(),
                                                   scored.starts.tolist())):
                # Ten digits: a score near 1 still ranks (six would tie thousands at 1.0).
                writer.writerow([rows.stamps[k], rows.value_texts[k], f"{score:.10g}",
                                 int(start)])
    except (SeriesFileError, OSError, ValueError) as exc:
        print(f"inferwatch anomaly score: {exc}", file=sys.stderr)
        return 2
    alerts = int(np.count_nonzero(scored.starts))
    counts = line.counts
    print(f"scored {counts.rows} rows as {counts.points} steps of {line.step:g} s: "
          f"{alerts} alerts", file=sys.stderr)
    if described := counts.describe():
        print(f"timestamp policy: {described}", file=sys.stderr)
    if args.json is not None:
        summary = {"input": args.input, "step_seconds": line.step, "alerts": alerts,
                   "policy": counts.as_dict()}
        with _open_out(args.json) as out:
            out.write(json.dumps(summary, indent=2) + "\n")
    return 0


def _calibration(args: argparse.Namespace) -> CalibratedParams:
    if args.cooldown_hours < 0:
        raise ValueError(f"--cooldown-hours must be >= 0, got {args.cooldown_hours}")
    return CalibratedParams(alerts_per_week=args.alerts_per_week,
                            cooldown_seconds=args.cooldown_hours * 3600)


def _read(path: str) -> SeriesFile:
    handle = sys.stdin if path == "-" else Path(path).open(newline="")
    with handle:
        return parse_series(handle, path)


def parse_series(handle: TextIO, name: str) -> SeriesFile:
    """Every ``timestamp,value`` row, in input order, whatever their times' order."""
    rows = SeriesFile([], [], [], [])
    for number, row in enumerate(csv.reader(handle), start=1):
        if not row or (number == 1 and row[0].strip().lower() == "timestamp"):
            continue
        if len(row) < 2:
            raise SeriesFileError(f"{name}:{number}: expected timestamp,value, got {row!r}")
        stamp, value = row[0].strip(), row[1].strip()
        rows.times.append(_timestamp(stamp, name, number))
        rows.values.append(_value(value, name, number))
        rows.stamps.append(stamp)
        rows.value_texts.append(value)
    if len(rows.times) < 2:
        raise SeriesFileError(f"{name}: needs at least 2 rows, got {len(rows.times)}")
    return rows


def _timestamp(text: str, name: str, number: int) -> float:
    try:
        return parse_timestamp(text)
    except ValueError as exc:
        raise SeriesFileError(f"{name}:{number}: timestamp {exc}") from None


def _value(text: str, name: str, number: int) -> float:
    if text == "" or text.lower() == "nan":
        return math.nan
    try:
        value = float(text)
    except ValueError:
        raise SeriesFileError(f"{name}:{number}: value {text!r} is not a number") from None
    if math.isinf(value):
        raise SeriesFileError(f"{name}:{number}: value {text!r} is infinite")
    return value


def _open_out(path: str) -> contextlib.AbstractContextManager[TextIO]:
    if path == "-":
        return contextlib.nullcontext(sys.stdout)
    return Path(path).open("w", newline="")
