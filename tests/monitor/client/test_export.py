"""``inferwatch export``: a frame written as CSV reads back equal; Parquet needs an engine."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")

from monitor.cli import main  # noqa: E402
from monitor.client import Client  # noqa: E402
from tests.monitor.client.conftest import Served  # noqa: E402

HAS_PARQUET = any(importlib.util.find_spec(n) for n in ("pyarrow", "fastparquet"))


@pytest.mark.parametrize(("what", "times"), [
    (["slos"], ["period_end", "evaluated_at"]),
    (["slo-history", "ttft", "--step", "3600"], ["time"]),
    (["alerts"], ["active_at", "fired_at", "resolved_at"]),
    (["runs", "sweep"], ["started_at", "finished_at"]),
    (["alert-history", "--slo", "availability"], ["at", "fired_at"]),
], ids=["slos", "an SLO's history", "alerts", "sweeps", "alert history"])
def test_csv_reads_back_as_the_frame(served: Served, tmp_path: Path, what: list[str],
                                     times: list[str]) -> None:
    out = tmp_path / "out.csv"
    end = served.api.now // 60 * 60 - 60   # a fixed range: the report's default ends now
    if what[0] == "slo-history":
        what = [*what, "--start", str(end - 86400), "--end", str(end)]
    assert main(["export", "--url", served.api.url, "--out", str(out), *what]) == 0
    with Client(served.api.url) as client:
        match what[0]:
            case "slos":
                expected = client.slos()
            case "slo-history":
                expected = client.slo_history("ttft", end - 86400, end, 3600)
            case "alerts":
                expected = client.alerts()
            case "alert-history":
                expected = client.alert_history(slo="availability")
                assert len(expected) == 7
            case _:
                expected = client.runs("sweep")
    back = pd.read_csv(out)
    # CSV has one empty cell for "" and null: the text columns' "" read back as null.
    for column in expected.columns[expected.dtypes == "str"]:
        expected[column] = expected[column].replace("", None)
    for column in times:
        back[column] = pd.to_datetime(back[column], utc=True, format="ISO8601")
    pd.testing.assert_frame_equal(back, expected, check_dtype=False)


def test_parquet_without_an_engine_says_what_to_install(
        served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "slos.parquet"
    status = main(["export", "--url", served.api.url, "--format", "parquet",
                   "--out", str(out), "slos"])
    if HAS_PARQUET:
        assert status == 0
        with Client(served.api.url) as client:
            pd.testing.assert_frame_equal(pd.read_parquet(out), client.slos())
    else:
        assert status == 2 and not out.exists()
        assert "pip install pyarrow" in capsys.readouterr().err


def test_an_unknown_slo_exits_2_with_the_apis_message(
        served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.csv"
    assert main(["export", "--url", served.api.url, "--out", str(out),
                 "slo-history", "nope"]) == 2
    assert "404: SLO 'nope' not found" in capsys.readouterr().err and not out.exists()
