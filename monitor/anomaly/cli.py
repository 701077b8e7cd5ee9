"""`inferwatch anomaly score`: the detectors over a CSV of ``timestamp,value`` rows.

    inferwatch anomaly score --input series.csv --output scores.csv [--direction both]

Rows are read as a stream (no look-ahead) and written as
``timestamp,value,anomaly_score,alert``: the score in [0, 1] (0.5 at the alert threshold),
``alert`` 1 only on the row where an alert starts. Timestamps are unix seconds or ISO 8601;
the step of the detectors is the median spacing of the timestamps unless ``--step`` is given.
An empty value is a gap. A bad row stops with its line number and what is wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import math
import sys
from pathlib import Path
from statistics import median
from typing import TextIO

from monitor.anomaly.detectors import Direction
from monitor.anomaly.params import AnomalyParams
from monitor.anomaly.series import score_series
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
    score.add_argument("--step", type=float, default=None,
                       help="seconds between points (default: the median spacing)")
    add_progress_argument(score)


def run(args: argparse.Namespace) -> int:
    try:
        points = _read(args.input)
        step = args.step or _median_step(points)
        params = AnomalyParams(step_seconds=step)
        with _open_out(args.output) as out, bar_for(args, len(points), "scoring",
                                                     unit="row") as bar:
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(["timestamp", "value", "anomaly_score", "alert"])
            alerts = 0
            for p in score_series(points, params, Direction(args.direction)):
                alerts += p.started
                writer.writerow([_number(p.timestamp), _number(p.value), f"{p.score:.6f}",
                                 int(p.started)])
                bar.advance()
    except (SeriesFileError, OSError, ValueError) as exc:
        print(f"inferwatch anomaly score: {exc}", file=sys.stderr)
        return 2
    print(f"scored {len(points)} points (step {step:g} s): {alerts} alerts", file=sys.stderr)
    return 0


def _read(path: str) -> list[tuple[float, float]]:
    handle = sys.stdin if path == "-" else Path(path).open(newline="")
    with handle:
        return parse_series(handle, path)


def parse_series(handle: TextIO, name: str) -> list[tuple[float, float]]:
    rows = csv.reader(handle)
    points: list[tuple[float, float]] = []
    for number, row in enumerate(rows, start=1):
        if not row or (number == 1 and row[0].strip().lower() == "timestamp"):
            continue
        if len(row) < 2:
            raise SeriesFileError(f"{name}:{number}: expected timestamp,value, got {row!r}")
        timestamp = _timestamp(row[0].strip(), name, number)
        value = _value(row[1].strip(), name, number)
        if points and timestamp <= points[-1][0]:
            raise SeriesFileError(f"{name}:{number}: timestamp {row[0]!r} is not after the "
                                  "previous row's; rows must be in time order")
        points.append((timestamp, value))
    if len(points) < 2:
        raise SeriesFileError(f"{name}: needs at least 2 rows, got {len(points)}")
    return points


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


def _median_step(points: list[tuple[float, float]]) -> float:
    return median(b[0] - a[0] for a, b in zip(points, points[1:], strict=False))


def _open_out(path: str) -> contextlib.AbstractContextManager[TextIO]:
    if path == "-":
        return contextlib.nullcontext(sys.stdout)
    return Path(path).open("w", newline="")


def _number(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.10g}"
