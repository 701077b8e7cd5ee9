"""The anomaly rule file: current, accepted by promtool and vmalert, and it behaves: promtool
runs it over series with a level shift (alert after `for`) and clean series (no alert)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.anomaly.promql_rules import NOT_EXPRESSED, generate_anomaly_rules
from monitor.cli import main
from tests.monitor.anomaly.vmalert_dry_run import assert_vmalert_parses
from tests.monitor.slo.test_rules import run_promtool

RULE_FILE = Path("deploy/prometheus/inferwatch-anomaly-rules.yml")
SHIFT_MINUTE = 181  # every series is steady for 3 hours (history for the 2h and 12h windows)
MINUTES = SHIFT_MINUTE + 20
QUIET = [2, 3, 4, 3]  # queue depth: median 3, MAD 0.5, so the spread is its 1-request floor


def test_the_checked_in_rule_file_is_current(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rules", "anomaly", "--check"]) == 0
    assert "not expressed: multivariate" in capsys.readouterr().err


def test_the_header_lists_every_detector_left_out() -> None:
    header = [line for line in generate_anomaly_rules().splitlines() if line.startswith("#")]
    for what, why in NOT_EXPRESSED:
        assert f"#   - {what}: {why}" in header


def _values(points: list[float]) -> str:
    return " ".join(f"{p:g}" for p in points)


def _counter(per_minute_before: float, per_minute_after: float) -> str:
    total, points = 0.0, []
    for minute in range(MINUTES):
        points.append(total)
        total += per_minute_before if minute < SHIFT_MINUTE - 1 else per_minute_after
    return _values(points)


def _queue(shifted_to: float | None) -> str:
    return _values([QUIET[m % 4] if shifted_to is None or m < SHIFT_MINUTE else shifted_to
                    for m in range(MINUTES)])


def _series(name: str, instance: str, values: str) -> dict[str, str]:
    return {"series": f'{name}{{job="engine", instance="{instance}"}}', "values": values}


def _alert(name: str, instance: str, severity: str = "warning",
           **extra: str) -> dict[str, Any]:
    return {"exp_labels": {"severity": severity, "detector": "inferwatch-anomaly",
                           "job": "engine", "instance": instance, **extra}}


def _test_file(rule_file: Path) -> dict[str, Any]:
    """Queue depth: `shifted` jumps from 2-4 to 15 (z about 8 once the shift has entered the
    rolling MAD: past 6, under the spike's 18);
    `clean` stays. Throughput: 10 req/s of 100 tokens each, then 55 tokens per request at the
    same load: 55% of the baseline, under the warning's 70% and over the critical's 50%."""
    series = [
        _series("gen_ai_server_requests_waiting", "shifted", _queue(15)),
        _series("gen_ai_server_requests_waiting", "clean", _queue(None)),
        _series("gen_ai_server_requests_total", "slow", _counter(600, 600)),
        _series("gen_ai_server_prompt_tokens_total", "slow", _counter(30_000, 30_000)),
        _series("gen_ai_server_generation_tokens_total", "slow", _counter(30_000, 3_000)),
    ]
    early, late = f"{SHIFT_MINUTE + 3}m", f"{SHIFT_MINUTE + 15}m"
    queue, throughput = "InferwatchAnomalyQueueDepth", "InferwatchThroughputBelowBaseline"
    checks = [
        (early, queue, []), (early, throughput, []),
        (late, queue, [_alert(queue, "shifted")]),
        (late, throughput, [_alert(throughput, "slow", level="warning")]),
        (late, "InferwatchAnomalyQueueDepthSpike", []),
    ]
    return {"rule_files": [str(rule_file)], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series,
                       "alert_rule_test": [{"eval_time": t, "alertname": name,
                                            "exp_alerts": alerts}
                                           for t, name, alerts in checks]}]}


def _without_annotations(directory: Path) -> Path:
    """The rule file less its summaries (they print the score, which is not under test)."""
    groups = yaml.safe_load(RULE_FILE.read_text())
    for group in groups["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    path = directory / RULE_FILE.name
    path.write_text(yaml.safe_dump(groups, sort_keys=False, width=1_000_000))
    return path


@pytest.mark.integration
def test_promtool_fires_on_a_level_shift_after_for_and_not_on_clean_series(
        tmp_path: Path) -> None:
    run_promtool("check", "rules", str(RULE_FILE))
    test_file = tmp_path / "anomaly.test.yml"
    test_file.write_text(yaml.safe_dump(_test_file(_without_annotations(tmp_path)),
                                        sort_keys=False))
    assert "SUCCESS" in run_promtool("test", "rules", str(test_file))


@pytest.mark.integration
def test_vmalert_parses_every_rule_as_metricsql() -> None:
    assert_vmalert_parses(RULE_FILE)
