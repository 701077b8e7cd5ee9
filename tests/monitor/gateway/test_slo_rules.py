"""The gateway's good/total counters feed the same generated burn-rate rules as the engine's:
a ratio SLO names them, and promtool checks and runs the rules generated for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.slo import rules
from monitor.slo.spec import Slo
from tests.monitor.slo.test_rules import run_promtool, write_rules

GOODPUT = Slo.model_validate({
    "name": "gateway-goodput", "objective": 0.99,
    "sli": {"kind": "ratio",
            "good": {"metric": "inferwatch_gateway_good_requests",
                     "labels": {"slo_class": "interactive"}},
            "total": {"metric": "inferwatch_gateway_requests_total",
                      "labels": {"slo_class": "interactive"}}}})


def test_bad_events_are_total_less_good_on_the_exact_counters():
    assert rules.events_promql(GOODPUT, 300) == (
        'sum(increase(inferwatch_gateway_requests_total{slo_class="interactive"}[5m])) - '
        'sum(increase(inferwatch_gateway_good_requests_total{slo_class="interactive"}[5m]))',
        'sum(increase(inferwatch_gateway_requests_total{slo_class="interactive"}[5m]))')


def test_a_gateway_histogram_is_no_ratio_counter():
    with pytest.raises(ValueError, match="not a counter"):
        Slo.model_validate({
            "name": "x", "objective": 0.99,
            "sli": {"kind": "ratio",
                    "good": {"metric": "inferwatch_gateway_time_to_first_token_seconds"},
                    "total": {"metric": "inferwatch_gateway_requests"}}})


@pytest.mark.integration
def test_promtool_checks_and_runs_the_generated_rules(tmp_path: Path):
    rule_file, test_file = write_rules(tmp_path, [GOODPUT])
    run_promtool("check", "rules", str(rule_file))
    assert "SUCCESS" in run_promtool("test", "rules", str(test_file))
