"""`inferwatch anomaly score`: a CSV in, scores and alert starts out; bad rows named."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from monitor.anomaly import timeline
from monitor.anomaly.params import AnomalyParams
from monitor.cli import main

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z


def write_series(path: Path, values: np.ndarray, iso: bool = False) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timestamp", "value"])
        for k, v in enumerate(values):
            t = T0 + 60 * k
            stamp = datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z") if iso \
                else str(t)
            w.writerow([stamp, "" if np.isnan(v) else f"{v:.6f}"])


def read_scores(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def series() -> np.ndarray:
    values = 100 * (1 + 0.03 * np.random.default_rng(0).standard_normal(400))
    values[250:280] *= 0.5     # a drop held for 30 points
    values[350] *= 8           # a spike
    values[300] = np.nan       # a gap
    return values


@pytest.mark.parametrize("iso", [False, True])
def test_scores_every_row_and_marks_where_alerts_start(tmp_path: Path, iso: bool,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    write_series(tmp_path / "in.csv", series(), iso=iso)
    code = main(["anomaly", "score", "--input", str(tmp_path / "in.csv"),
                 "--output", str(tmp_path / "out.csv")])
    assert code == 0
    rows = read_scores(tmp_path / "out.csv")
    assert list(rows[0]) == ["timestamp", "value", "anomaly_score", "alert"]
    assert len(rows) == 400
    # The input's own timestamp text, ISO or unix seconds.
    assert rows[10]["timestamp"] == (
        datetime.fromtimestamp(T0 + 600, UTC).isoformat().replace("+00:00", "Z") if iso
        else str(T0 + 600))
    scores = [float(r["anomaly_score"]) for r in rows]
    assert all(0.0 <= s <= 1.0 for s in scores)
    starts = [k for k, r in enumerate(rows) if r["alert"] == "1"]
    # The drop alerts at once; the spike 70 minutes after it ends is within the cooldown
    # (6 hours): no second alert, its score just under the threshold.
    assert len(starts) == 1 and 250 <= starts[0] <= 255
    assert max(scores[:240]) < 0.5 <= scores[starts[0]]
    assert [k for k, s in enumerate(scores) if s >= 0.5] == starts  # 0.5+ only at starts
    assert scores[350] > 0.45
    assert rows[300]["value"] == ""
    assert "1 alerts" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "error"), [
    ("timestamp,value\n1,2\nyesterday,3\n", "in.csv:3: timestamp 'yesterday' is neither"),
    ("1,2\n2,abc\n", "in.csv:2: value 'abc' is not a number"),
    ("1,2\n2,inf\n", "in.csv:2: value 'inf' is infinite"),
    ("1,2\n1,3\n", "needs at least 2 distinct timestamps"),
    ("1,2\n3\n", "in.csv:2: expected timestamp,value"),
    ("timestamp,value\n1,2\n", "needs at least 2 rows"),
])
def test_bad_rows_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str,
                            error: str) -> None:
    (tmp_path / "in.csv").write_text(text)
    code = main(["anomaly", "score", "--input", str(tmp_path / "in.csv"),
                 "--output", str(tmp_path / "out.csv")])
    assert code == 2
    assert error in capsys.readouterr().err


def test_runs_as_a_command_over_pipes(tmp_path: Path) -> None:
    write_series(tmp_path / "in.csv", series())
    result = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "anomaly", "score", "--input", "-", "--output", "-",
         "--direction", "down"],
        stdin=(tmp_path / "in.csv").open(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "timestamp,value,anomaly_score,alert" and len(lines) == 401
    # Only drops count: the spike up at row 350 is not an alert.
    starts = [k for k, line in enumerate(lines[1:]) if line.endswith(",1")]
    assert len(starts) == 1 and 250 <= starts[0] <= 255


def messy(values: np.ndarray) -> tuple[list[str], list[float]]:
    """The rows of ``values`` (one a minute) as a real export mangles them: ISO stamps, an
    exporter restart that repeats 5 minutes, a clock set back 3 minutes, 2 missing rows and
    a few stamps off by seconds. Returns the stamp texts and values in file order."""
    def iso(t: float) -> str:
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")

    stamps, out = [], []
    for k, v in enumerate(values):
        if k in (120, 121):
            continue                                    # missing rows
        jitter = 7 if k % 97 == 0 else 0                # off the minute by 7 s
        stamps.append(iso(T0 + 60 * k + jitter))
        out.append(float(v))
        if k == 200:                                    # restart: 5 minutes again
            for j in range(196, 201):
                stamps.append(iso(T0 + 60 * j))
                out.append(float(values[j]))
        if k == 300:                                    # clock back 3 minutes, one row
            stamps.append(iso(T0 + 60 * 297))
            out.append(float(values[297]))
    return stamps, out


def test_messy_timestamps_are_placed_by_the_policy_and_counted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    values = series()
    stamps, vals = messy(values)
    with (tmp_path / "in.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["timestamp", "value"])
        w.writerows([s, "" if np.isnan(v) else f"{v:.6f}"] for s, v in zip(stamps, vals))
    code = main(["anomaly", "score", "--input", str(tmp_path / "in.csv"),
                 "--output", str(tmp_path / "out.csv"), "--json", str(tmp_path / "s.json")])
    assert code == 0
    rows = read_scores(tmp_path / "out.csv")
    # One row per input row, in input order, with the input's own text.
    assert [r["timestamp"] for r in rows] == stamps
    assert len(rows) == 400 - 2 + 5 + 1
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["step_seconds"] == 60
    assert summary["policy"] == {
        "rows": len(rows), "points": 400, "backwards": 4 + 1, "repeated": 5 + 1, "merged": 0,
        "off_grid": 5, "gap_steps": 2, "gap_steps_skipped": 0, "missing_values": 1}
    err = capsys.readouterr().err
    assert "5 rows back in time" in err and "2 empty steps (gaps)" in err
    # The same alert as the clean file: the drop, marked once (the spike is in its cooldown).
    starts = [r["timestamp"] for r in rows if r["alert"] == "1"]
    assert len(starts) == 1 and summary["alerts"] == 1
    assert starts[0] in {datetime.fromtimestamp(T0 + 60 * k, UTC).strftime("%Y-%m-%d %H:%M:%S")
                         for k in range(250, 256)}
    # A repeated row shares its step's score.
    first, again = (r for r in rows if r["timestamp"] == stamps[198])
    assert first["anomaly_score"] == again["anomaly_score"]


def test_a_gap_past_the_detectors_memory_is_fed_as_long_as_the_memory() -> None:
    line = timeline.build([0.0, 60.0, 60.0 * 10**6, 60.0 * (10**6 + 1)], [1.0, 2.0, 3.0, 4.0])
    memory = timeline.memory_points(AnomalyParams(step_seconds=60))
    assert line.counts.gap_steps == memory
    assert line.counts.gap_steps + line.counts.gap_steps_skipped == 10**6 - 2
    assert line.counts.points == 4 + memory
    assert line.point_of_row.tolist() == [0, 1, memory + 2, memory + 3]


def test_the_false_alert_rate_and_cooldown_are_settings(tmp_path: Path) -> None:
    """A bad setting is named; no cooldown lets the spike after the drop alert too."""
    write_series(tmp_path / "in.csv", series())
    out = tmp_path / "out.csv"
    assert main(["anomaly", "score", "--input", str(tmp_path / "in.csv"), "--output", str(out),
                 "--alerts-per-week", "0"]) == 2
    assert main(["anomaly", "score", "--input", str(tmp_path / "in.csv"), "--output", str(out),
                 "--cooldown-hours", "0"]) == 0
    starts = [k for k, r in enumerate(read_scores(out)) if r["alert"] == "1"]
    assert len(starts) == 2 and 250 <= starts[0] <= 255 and starts[1] == 350
