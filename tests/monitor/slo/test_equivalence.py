"""Two evaluation paths, one truth: the monitor's evaluator and Prometheus running the
generated rules (through promtool) fire the same alerts on the same input series, within one
evaluation interval, for SLO periods from 1 to 90 days (their windows scale with the period).

The input is per-minute counter samples (what Prometheus would scrape every minute) for an
availability SLO and a TTFT latency SLO: steady traffic, an outage of every request, a
stretch of slow first tokens, recovery. The monitor's evaluator runs on the same per-minute
increments; at every minute that is not within one interval of one of its own transitions,
promtool must find exactly the alerts the evaluator found (labels; annotations are stripped
from the rules here, since the two paths format numbers differently).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from monitor.slo import rules
from monitor.slo.evaluator import SloEvaluator
from monitor.slo.promtool_tests import (
    ExpectedAlert,
    PromtoolTest,
    expand_values,
    promtool_test_file,
)
from monitor.slo.source import MinuteArraySource
from monitor.slo.spec import Slo
from monitor.slo.windows import BURN_ALERT, NO_DATA_ALERT, burn_windows
from tests.monitor.slo.test_rules import run_promtool

PERIODS = ["1d", "7d", "14d", "28d", "30d", "90d"]


def specs(period: str) -> tuple[Slo, Slo]:
    """An availability and a TTFT SLO over ``period`` (their windows scale with it)."""
    return (
        Slo.model_validate({
            "name": "eq-availability", "service": "chat", "objective": 0.999, "window": period,
            "sli": {"kind": "availability", "errors": ["model_error", "timeout"]},
            "selector": {"target": "ref"}, "alerting": {"min_events": 500}}),
        Slo.model_validate({
            "name": "eq-ttft", "service": "chat", "objective": 0.99, "labels": {"team": "serving"},
            "window": period,
            "sli": {"kind": "latency", "metric": "ttft", "threshold_seconds": 0.2},
            "selector": {"target": "ref"}}),
    )


MINUTES = 11 * 60
TTFT_NAME = "gen_ai_server_time_to_first_token_seconds"


def traffic() -> dict[str, np.ndarray]:
    """Per-minute increments of every series: 100 requests a minute (fewer at night)."""
    rng = np.random.default_rng(3)
    requests = np.full(MINUTES, 100.0)
    requests[60:120] = 3.0  # quiet: below min_events even if it all failed
    errors = np.zeros(MINUTES)
    errors[rng.integers(0, MINUTES, 20)] = 1.0  # background noise, far below any factor
    errors[6 * 60:6 * 60 + 25] = requests[6 * 60:6 * 60 + 25]  # an outage: every request
    slow = np.zeros(MINUTES)
    slow[8 * 60:9 * 60] = 0.3 * requests[8 * 60:9 * 60]        # 30% of first tokens > 0.2 s
    return {"requests": requests - errors, "errors": errors, "ttft_count": requests - errors,
            "ttft_fast": requests - errors - slow}


def evaluator_alerts(increments: dict[str, np.ndarray],
                     slos: tuple[Slo, Slo]) -> list[set[tuple[str, ...]]]:
    """The evaluator's active alerts (alertname, slo, window, severity) after each minute."""
    has = np.ones(MINUTES, dtype=bool)
    requests, errors = increments["requests"], increments["errors"]
    availability, ttft = slos
    source = MinuteArraySource(0, {
        availability.name: (requests, requests + errors, has),
        ttft.name: (increments["ttft_fast"], increments["ttft_count"], has)})
    evaluator = SloEvaluator(list(slos), source, settle_seconds=0)
    out = []
    for minute in range(1, MINUTES + 1):
        active = set()
        for status in evaluator.tick(minute * 60.0):
            for c in status.conditions:
                if c.active:
                    active.add((c.labels["alertname"], c.labels["slo"], c.labels["window"],
                                c.labels["severity"]))
        out.append(active)
    return out


def input_series(increments: dict[str, np.ndarray]) -> list[tuple[str, str]]:
    """Cumulative samples at 0, 1m, 2m, ... (the value at k minutes counts minutes 1..k)."""
    def cumulative(values: np.ndarray) -> str:
        return expand_values([0.0, *np.cumsum(values).tolist()])

    ref = 'job="ref"'
    return [
        (f'gen_ai_server_requests_total{{{ref},finish_reason="stop",model="tiny"}}',
         cumulative(increments["requests"] + increments["errors"])),
        (f'gen_ai_server_request_errors_total{{{ref},error_type="model_error",model="tiny"}}',
         cumulative(increments["errors"])),
        (f'gen_ai_server_request_errors_total{{{ref},error_type="rejected",model="tiny"}}',
         cumulative(np.full(MINUTES, 2.0))),  # 429s this SLO does not count
        (f'{TTFT_NAME}_count{{{ref},model="tiny"}}', cumulative(increments["ttft_count"])),
        (f'{TTFT_NAME}_bucket{{{ref},le="0.2",model="tiny"}}',
         cumulative(increments["ttft_fast"])),
    ]


def rules_without_annotations(slos: tuple[Slo, ...]) -> str:
    document = yaml.safe_load(rules.generate_rules(list(slos)))
    for group in document["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    return yaml.safe_dump(document, sort_keys=False)


def expected(active: set[tuple[str, ...]], alertname: str,
             slos: tuple[Slo, Slo]) -> list[ExpectedAlert]:
    out = []
    by_name = {s.name: s for s in slos}
    for name, slo, window, severity in sorted(active):
        if name != alertname:
            continue
        spec = by_name[slo]
        out.append(ExpectedAlert({**spec.labels, "alertname": name, "slo": slo,
                                  "service": spec.service, "severity": severity,
                                  "window": window}))
    return out


@pytest.mark.parametrize("period", PERIODS)
def test_the_evaluator_and_prometheus_fire_the_same_alerts(tmp_path: Path, period: str) -> None:
    slos = specs(period)
    increments = traffic()
    ours = evaluator_alerts(increments, slos)
    fired = {a for minute in ours for a in minute}
    # The outage pages the availability SLO on its fastest page window, the slow first tokens
    # burn the TTFT SLO (a page up to 30 days; at 90 days an hour at 30x is a ticket), and
    # nothing pages during the quiet hour (fewer events than min_events).
    availability, ttft = slos
    fastest = burn_windows(availability)[0]
    assert fastest.severity.value == "page"
    assert (BURN_ALERT, availability.name, fastest.name, "page") in fired
    ttft_severities = {a[3] for a in fired if a[1] == ttft.name}
    assert ttft_severities == ({"ticket"} if period == "90d" else {"page", "ticket"})
    assert not any(a[1] == "eq-availability" and a[3] == "page" and 70 <= m < 120
                   for m, s in enumerate(ours) for a in s)

    checks = []
    transitions = 0
    for k in range(2, MINUTES - 1):  # ours[k - 1] is the evaluation at k minutes
        before, now, after = ours[k - 2], ours[k - 1], ours[k]
        if before != now:
            transitions += 1
        if before == now == after:  # one interval or more from any transition of ours
            for alertname in (BURN_ALERT, NO_DATA_ALERT):
                checks.append((k * 60.0, alertname, expected(now, alertname, slos)))
    assert transitions >= 4 and len(checks) > 1000

    (tmp_path / "rules.yml").write_text(rules_without_annotations(slos))
    test = PromtoolTest(60.0, input_series(increments), checks, "equivalence")
    (tmp_path / "test.yml").write_text(promtool_test_file(
        ["rules.yml"], [test], evaluation_interval=60.0))
    run_promtool("test", "rules", str(tmp_path / "test.yml"))
