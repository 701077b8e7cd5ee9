"""Burn-rate windows follow the SLO's period: scaled windows with the workbook's factors, the
guard rails, `inferwatch rules windows`, the generated rules under promtool, and detection and
reset times in the monitor's own evaluator against the workbook's bound, for 1 to 90 days.

(The evaluator and Prometheus agreeing on the same series for each period is
tests/monitor/slo/test_equivalence.py.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.slo_periods import measure
from monitor import cli
from monitor.slo.durations import parse_duration
from monitor.slo.loaders import SloFileError, load_slos
from monitor.slo.spec import Slo
from monitor.slo.windows import BurnWindow, burn_windows, check_short_windows
from tests.monitor.slo.test_rules import run_promtool, write_rules

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
DAY = 1440

# Worked out by hand: the 30-day table's windows x period / 30 days, rounded to whole minutes,
# no short window under 2 minutes, a row dropped when its long window is under twice its short.
WINDOWS = {
    "1d": ["12m/2m", "48m/4m", "2h24m/12m"],  # 1h/5m -> 2m/2m: dropped
    "7d": ["14m/2m", "1h24m/7m", "5h36m/28m", "16h48m/1h24m"],
    "14d": ["28m/2m", "2h48m/14m", "11h12m/56m", "1d9h36m/2h48m"],
    "28d": ["56m/5m", "5h36m/28m", "22h24m/1h52m", "2d19h12m/5h36m"],
    "30d": ["1h/5m", "6h/30m", "1d/2h", "3d/6h"],
    "90d": ["3h/15m", "18h/1h30m", "3d/6h", "9d/18h"],
}
FACTORS = {"1h": 14.4, "6h": 6.0, "1d": 3.0, "3d": 1.0}  # of the 30-day row each comes from


def slo(period: str, **fields: Any) -> Slo:
    spec: dict[str, Any] = {"name": f"avail-{period}", "objective": 0.999, "window": period,
                            "sli": {"kind": "availability"}, "selector": {"target": "ref"}}
    spec.update(fields)
    return Slo.model_validate(spec)


@pytest.mark.parametrize("period", list(WINDOWS))
def test_windows_scale_with_the_period_and_keep_the_factors(period: str) -> None:
    windows = burn_windows(slo(period))
    assert [w.name for w in windows] == WINDOWS[period]
    expected_factors = [14.4, 6, 3, 1][4 - len(windows):]
    assert [w.factor for w in windows] == pytest.approx(expected_factors)
    assert all(w.factor >= 1 and w.long_seconds >= 2 * w.short_seconds >= 240 for w in windows)
    # The share of the budget each alert spends before it fires is the 30-day table's (up to
    # the rounding of the windows to whole minutes).
    shares = [w.budget_consumed for w in windows]
    assert shares == pytest.approx([0.02, 0.05, 0.10, 0.10][4 - len(windows):], rel=0.1)


def test_a_seven_day_page_is_not_a_quarter_of_the_workbooks_rate() -> None:
    """The old table kept 30-day windows for a 7-day SLO: a page at 3.36x over 1h."""
    page = burn_windows(slo("7d"))[0]
    assert (page.name, page.factor) == ("14m/2m", pytest.approx(14.4))


@pytest.mark.parametrize("period", list(WINDOWS))
def test_the_evaluator_detects_and_resets_within_the_workbook_bound(period: str) -> None:
    """100% errors from a clean steady state: each window fires no later than the workbook's
    detection time (budget share x period x error budget) plus one minute of data, and clears
    no later than its reset time plus one minute after the errors stop."""
    spec = slo(period)
    timings = measure(spec)
    for w in burn_windows(spec):
        bound = w.budget_consumed * spec.window.nominal_seconds * spec.error_budget
        assert w.detection_seconds(1.0, spec.error_budget) == pytest.approx(bound)
        fired, cleared = timings[w.name].fired, timings[w.name].cleared
        assert fired is not None and bound <= fired <= bound + 60, w.name
        assert cleared is not None, w.name
        assert cleared <= w.reset_seconds(1.0, spec.error_budget) + 60, w.name


@pytest.mark.integration
@pytest.mark.parametrize("period", list(WINDOWS))
def test_generated_rules_and_their_unit_tests_pass_promtool(tmp_path: Path, period: str) -> None:
    specs = [slo(period), slo(period, name=f"ttft-{period}", objective=0.99,
                              sli={"kind": "latency", "metric": "ttft",
                                   "threshold_seconds": 0.2})]
    rule_file, test_file = write_rules(tmp_path, specs)
    text = rule_file.read_text()
    for name in WINDOWS[period]:
        assert f"window: {name}" in text
    run_promtool("check", "rules", str(rule_file))
    run_promtool("test", "rules", str(test_file))


# --- guard rails -----------------------------------------------------------------------------

def test_a_period_too_short_to_page_is_an_error_naming_the_slo_file(tmp_path: Path) -> None:
    path = tmp_path / "slos.yaml"
    path.write_text("slos:\n  - {name: blip, objective: 0.99, window: 6h, "
                    "sli: {kind: availability}}\n")
    with pytest.raises(SloFileError) as caught:
        load_slos(path)
    message = str(caught.value)
    assert str(path) in message and "slos[0].window" in message
    assert "a 6h period is too short to page" in message
    # Without pages it alerts with the tickets that still fit.
    path.write_text("slos:\n  - {name: blip, objective: 0.99, window: 6h, "
                    "sli: {kind: availability}, alerting: {page: false}}\n")
    (spec,) = load_slos(path)
    assert [w.name for w in burn_windows(spec)] == ["12m/2m", "36m/3m"]


def test_explicit_windows_below_factor_one_are_refused() -> None:
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        slo("7d", alerting={"windows": [{"severity": "ticket", "long_seconds": "3d",
                                         "short_seconds": "6h", "factor": 0.23}]})


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_a_fixed_table_with_a_factor_below_one_is_refused(tmp_path: Path) -> None:
    # The old default for a 7-day SLO: the 30-day table's 3d ticket at 10% -> factor 0.23.
    file = write(tmp_path / "w.yaml", "mode: fixed\ntables:\n  - period: 7d\n    windows:\n"
                 "      - {severity: ticket, long: 3d, short: 6h, budget_consumed: 0.1}\n")
    with pytest.raises(ValueError, match="factor of 0.233, below 1"):
        burn_windows(slo("7d", alerting={"windows_file": file}))


def test_a_fixed_table_is_used_as_written_for_its_own_period_only(tmp_path: Path) -> None:
    file = write(tmp_path / "w.yaml", "mode: fixed\ntables:\n  - period: 7d\n    windows:\n"
                 "      - {severity: page, long: 1h, short: 5m, budget_consumed: 0.08}\n"
                 "      - {severity: ticket, long: 1d, short: 2h, budget_consumed: 0.2}\n")
    page, ticket = burn_windows(slo("7d", alerting={"windows_file": file}))
    assert (page.name, page.factor) == ("1h/5m", pytest.approx(0.08 * 168))
    assert (ticket.name, ticket.factor) == ("1d/2h", pytest.approx(1.4))
    with pytest.raises(ValueError, match="no window table for a 4w period"):
        burn_windows(slo("28d", alerting={"windows_file": file}))


def test_short_windows_under_twice_the_interval_are_refused() -> None:
    spec = slo("7d")  # its shortest short window is 2m
    check_short_windows([spec], 60.0, "rule evaluation interval")
    with pytest.raises(ValueError, match="14m/2m page window's short window 2m is under twice "
                                         "the rule evaluation interval"):
        check_short_windows([spec], 90.0, "rule evaluation interval")


def test_timeslice_windows_are_whole_slices() -> None:
    spec = slo("7d", budgeting="Timeslices", timeslice_seconds="5m", timeslice_target=0.99)
    assert [w.name for w in burn_windows(spec)][:2] == ["15m/5m", "1h25m/5m"]


# --- the command ---------------------------------------------------------------------------

def test_rules_windows_prints_each_rows_detection_and_reset(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["rules", "windows", "--period", "7d"]) == 0
    out = capsys.readouterr().out
    page = next(line for line in out.splitlines() if line.startswith("page     14m/2m"))
    # 14.4 x 0.001 x 14 minutes = 12.1 s to detect; 2m x (1 - 14.4 x 0.001) = 1m58s to reset.
    assert page.split()[2:] == ["14.4", "2.00%", "12.1s", "1m58s"]
    assert cli.main(["rules", "windows", "--period", "6h"]) == 0
    assert "A 6h SLO cannot page" in capsys.readouterr().out
    assert cli.main(["rules", "windows", "--period", "soon"]) == 2
    assert "'soon' is not a duration" in capsys.readouterr().err


def test_rules_generate_refuses_windows_under_twice_its_interval(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    specs = tmp_path / "slos.yaml"
    specs.write_text("slos:\n  - {name: weekly, objective: 0.99, window: 7d, "
                     "sli: {kind: availability}}\n")
    assert cli.main(["rules", "generate", "--slos", str(specs), "--out", str(tmp_path),
                     "--interval", "2m"]) == 2
    assert "under twice the rule evaluation interval (--interval) (2m)" in capsys.readouterr().err


def test_window_detection_identity() -> None:
    """detection = factor x budget x long, the workbook's budget share x period x budget."""
    w = BurnWindow(burn_windows(slo("30d"))[0].severity, 3600.0, 300.0, 0.02, 14.4, 0.0)
    assert w.detection_seconds(1.0, 0.001) == pytest.approx(0.02 * parse_duration("30d") * 0.001)
    assert w.reset_seconds(1.0, 0.001) == pytest.approx(300 * (1 - 0.0144))
