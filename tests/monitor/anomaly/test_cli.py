"""`inferwatch anomaly score`: a CSV in, scores and alert starts out; bad rows named."""

from __future__ import annotations

import csv
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

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
    assert float(rows[10]["timestamp"]) == T0 + 600
    scores = [float(r["anomaly_score"]) for r in rows]
    assert all(0.0 <= s <= 1.0 for s in scores)
    starts = [k for k, r in enumerate(rows) if r["alert"] == "1"]
    assert len(starts) == 2
    assert 250 <= starts[0] <= 255 and starts[1] == 350
    assert max(scores[:240]) < 0.5 < min(scores[255:275])
    assert rows[300]["value"] == ""
    assert "2 alerts" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "error"), [
    ("timestamp,value\n1,2\nyesterday,3\n", "in.csv:3: timestamp 'yesterday' is neither"),
    ("1,2\n2,abc\n", "in.csv:2: value 'abc' is not a number"),
    ("1,2\n2,inf\n", "in.csv:2: value 'inf' is infinite"),
    ("1,2\n1,3\n", "in.csv:2: timestamp '1' is not after the previous row's"),
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
