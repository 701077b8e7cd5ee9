"""The seasonal anomaly rules (`inferwatch rules anomaly --seasonal`): current, accepted by
promtool and vmalert, and they behave. promtool runs them, daily, beside the base rule file
over 3 days and 21 hours of a traffic pattern with a sharp evening drop (20 req/s at night,
180 by day): the clean series does not alert once there are 3 days of history (the base
file's trailing detector, which it did page on the first evening, defers to the seasonal
score), and the same pattern that drops to its night level at 14:00 of the fourth day pages
`InferwatchSeasonal...` after `for`, and only that."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.anomaly.promql_rules import NOT_EXPRESSED, generate_anomaly_rules
from monitor.anomaly.promql_seasonal import generate_seasonal_rules, season_tag
from monitor.cli import main
from tests.monitor.anomaly.vmalert_dry_run import assert_vmalert_parses
from tests.monitor.slo.test_rules import run_promtool

SEASONAL_FILE = Path("deploy/prometheus/inferwatch-anomaly-seasonal-rules.yml")
STEP_MINUTES = 4  # 30 points in the base file's 2h window, as many as it needs
DAY = 1440
NIGHT, NOON = 20.0, 180.0
DROP = 3 * DAY + 14 * 60  # the fourth day, 14:00: the deviating series falls to NIGHT
END = 3 * DAY + 20 * 60 + 40
SIGNAL = "inferwatch_target:offered_requests_per_second"
TRAILING = "InferwatchAnomalyOfferedRequestsPerSecond"
SEASONAL = "InferwatchSeasonalOfferedRequestsPerSecond"


def _daily(minute: int) -> float:
    """20 until 8:00, up to 180 by 8:30, down from 20:00 to 20 by 20:30."""
    m = minute % DAY
    ramp = [(8 * 60, NIGHT, NOON), (20 * 60, NOON, NIGHT)]
    level = NIGHT if m < ramp[0][0] or m >= ramp[1][0] + 30 else NOON
    for start, low, high in ramp:
        if start <= m < start + 30:
            level = low + (high - low) * (m - start) / 30
    return level


def _points(deviate: bool) -> list[float]:
    noise = [((k * 37) % 7 - 3) * 0.5 for k in range(END // STEP_MINUTES + 1)]
    return [round(NIGHT if deviate and m >= DROP else _daily(m), 3) + noise[k]
            for k, m in enumerate(range(0, END + 1, STEP_MINUTES))]


def test_the_checked_in_files_are_current() -> None:
    assert main(["rules", "anomaly", "--seasonal", "weekly", "--check"]) == 0


def test_seasonality_is_no_longer_listed_as_inexpressible() -> None:
    assert not any(what.startswith("seasonal") for what, _ in NOT_EXPRESSED)
    assert "--seasonal weekly" in generate_anomaly_rules()
    assert "offset 167h45m" in SEASONAL_FILE.read_text()  # a week less half the 30m window


def test_an_unknown_season_is_refused() -> None:
    with pytest.raises(ValueError, match="--seasonal 'hourly'"):
        season_tag("hourly")


def _without_annotations(text: str, path: Path) -> Path:
    groups = yaml.safe_load(text)
    for group in groups["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    path.write_text(yaml.safe_dump(groups, sort_keys=False, width=1_000_000))
    return path


def _expected(instance: str, detector: str) -> list[dict[str, Any]]:
    return [{"exp_labels": {"severity": "warning", "detector": detector, "job": "engine",
                            "instance": instance}}]


def _test_file(rule_files: list[Path]) -> dict[str, Any]:
    series = [{"series": f'{SIGNAL}{{job="engine",instance="{name}"}}',
               "values": " ".join(f"{v:g}" for v in _points(name == "deviating"))}
              for name in ("clean", "deviating")]

    def at(minute: int) -> str:
        return f"{minute}m"

    evening = 20 * 60 + 40  # after the drop of 20:00-20:30
    checks = [
        # Day one: no seasonal history, the trailing detector pages the evening drop.
        (at(evening), TRAILING, _expected("clean", "inferwatch-anomaly")
         + _expected("deviating", "inferwatch-anomaly")),
        (at(evening), SEASONAL, []),
        # Day four: the drop at 14:00 is pending (for: 5m), then pages, seasonally only.
        (at(DROP + 4), SEASONAL, []),
        (at(DROP + 12), SEASONAL, _expected("deviating", "inferwatch-anomaly-seasonal")),
        (at(DROP + 12), TRAILING, []),
        # The same evening drop as day one's is the pattern now: no page of either kind.
        (at(3 * DAY + evening), SEASONAL, []),
        (at(3 * DAY + evening), TRAILING, []),
    ]
    return {"rule_files": [str(p) for p in rule_files],
            "evaluation_interval": f"{STEP_MINUTES}m",
            "tests": [{"interval": f"{STEP_MINUTES}m", "input_series": series,
                       "alert_rule_test": [{"eval_time": t, "alertname": name,
                                            "exp_alerts": alerts}
                                           for t, name, alerts in checks]}]}


def test_the_deviation_is_a_normal_value_at_another_time_of_day() -> None:
    """No static threshold separates them: the deviating value is the night's level."""
    clean, deviating = _points(False), _points(True)
    k = (DROP + 12) // STEP_MINUTES
    assert min(clean) <= deviating[k] <= max(clean)
    assert deviating[k] < clean[k] - 100


@pytest.mark.integration
def test_promtool_pages_on_a_seasonal_deviation_after_for_and_not_on_the_pattern(
        tmp_path: Path) -> None:
    run_promtool("check", "rules", str(SEASONAL_FILE))
    base = _without_annotations(generate_anomaly_rules(), tmp_path / "base.yml")
    seasonal = _without_annotations(generate_seasonal_rules("daily"), tmp_path / "daily.yml")
    test_file = tmp_path / "seasonal.test.yml"
    test_file.write_text(yaml.safe_dump(_test_file([base, seasonal]), sort_keys=False))
    assert "SUCCESS" in run_promtool("test", "rules", str(test_file))


@pytest.mark.integration
def test_vmalert_parses_the_seasonal_rules_as_metricsql() -> None:
    assert_vmalert_parses(SEASONAL_FILE)
