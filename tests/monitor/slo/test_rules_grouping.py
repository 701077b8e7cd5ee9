"""An SLO split per tenant (``grouping: [tenant]``): the generated rules sum by tenant, each
tenant pages on its own burn with its label, and the min_events gate keeps a tenant with a few
requests an hour quiet, however bad they are. promtool runs the generated unit tests: a busy
tenant burning fast pages, a healthy one beside it and a quiet one (3 requests an hour, 1 bad)
do not; without the gate, the quiet one pages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.slo import rules
from monitor.slo.loaders import SloFileError, load_slos
from monitor.slo.promtool_tests import (
    BUSY,
    QUIET,
    STEADY,
    ExpectedAlert,
    alert_scenarios,
    group_eval_order,
    promtool_test_file,
)
from monitor.slo.rules_cli import TEST_FILE
from monitor.slo.spec import DEFAULT_GROUPED_MIN_EVENTS, Slo
from monitor.slo.windows import BURN_ALERT
from tests.monitor.slo.test_rules import ROOT, run_promtool, write_rules

EXAMPLE = ROOT / "alerts" / "slos" / "gateway-tenants.yaml"
(GATEWAY,) = load_slos(EXAMPLE)
# An engine SLI split by model: its error counter may be missing for a model (0 for it).
PER_MODEL = Slo.model_validate({
    "name": "fleet-availability-per-model", "objective": 0.999, "window": "30d",
    "selector": {"target": "fleet"}, "grouping": ["model"],
    "sli": {"kind": "availability", "errors": ["oom", "rejected"]},
    "alerting": {"min_events": 50}})


def without_gate(slo: Slo) -> Slo:
    return slo.model_copy(update={"alerting": slo.alerting.model_copy(
        update={"min_events": 0})})


def burn_alerts(slos: list[Slo]) -> list[ExpectedAlert]:
    return [a for s in alert_scenarios(slos) for _, name, alerts in s.test.alert_rule_tests
            if name == BURN_ALERT for a in alerts]


def alert_rules(slo: Slo) -> list[dict[str, Any]]:
    (group,) = rules.rule_groups(slo)
    return [r for r in group["rules"] if r.get("alert") == BURN_ALERT]


def test_the_example_is_split_per_tenant_with_the_default_gate() -> None:
    assert GATEWAY.grouping == ("tenant",)
    assert GATEWAY.alerting.min_events == DEFAULT_GROUPED_MIN_EVENTS == 100
    assert without_gate(GATEWAY).alerting.min_events == 0
    explicit = Slo.model_validate({**GATEWAY.model_dump(), "alerting": {"min_events": 0}})
    assert explicit.alerting.min_events == 0  # given: kept, even 0
    whole = Slo.model_validate({**GATEWAY.model_dump(), "grouping": [], "alerting": {}})
    assert whole.alerting.min_events == 0  # an SLO as a whole keeps its default


def test_events_are_summed_by_tenant() -> None:
    assert rules.events_promql(GATEWAY, 3600) == (
        "sum by (tenant) (increase(inferwatch_gateway_requests_total[1h])) - "
        "sum by (tenant) (increase(inferwatch_gateway_good_requests_total[1h]))",
        "sum by (tenant) (increase(inferwatch_gateway_requests_total[1h]))")


def test_a_missing_error_counter_is_zero_for_each_group() -> None:
    bad, total = rules.events_promql(PER_MODEL, 300)
    requests = 'sum by (model) (increase(gen_ai_server_requests_total{job="fleet"}[5m]))'
    assert bad == (
        '(sum by (model) (increase(gen_ai_server_request_errors_total{job="fleet",'
        f'error_type=~"oom|rejected"}}[5m])) or 0 * {requests})')
    assert total == (
        f'{requests} + (sum by (model) (increase(gen_ai_server_request_errors_total'
        f'{{job="fleet",error_type=~"rejected"}}[5m])) or 0 * {requests})')


def test_each_tenant_pages_with_its_label_past_the_gate() -> None:
    page = alert_rules(GATEWAY)[0]
    assert page["expr"] == (
        'inferwatch_slo:error_ratio:ratio_rate1h{slo="gateway-goodput-per-tenant"} / 0.01 > 14.4'
        ' and inferwatch_slo:error_ratio:ratio_rate5m{slo="gateway-goodput-per-tenant"} / 0.01'
        ' > 14.4 and inferwatch_slo:sli_events:increase1h{slo="gateway-goodput-per-tenant"}'
        ' >= 100')
    assert "tenant" not in page["labels"]  # the series' own label: one alert per tenant
    notes = page["annotations"]
    assert notes["summary"].startswith(
        "SLO gateway-goodput-per-tenant for tenant={{ $labels.tenant }} is burning")
    assert notes["budget_remaining"].startswith(
        '{{ with printf "inferwatch_slo:error_budget_remaining:ratio30d{'
        'slo=\\"gateway-goodput-per-tenant\\",tenant=\\"%[1]s\\"}" $labels.tenant | query }}')
    assert notes["time_to_exhaustion"].count('tenant=\\"%[1]s\\"') == 2


@pytest.mark.parametrize(("fields", "error"), [
    ({"grouping": ["slo"]}, "name the SLO's own series"),
    ({"grouping": ["tenant", "tenant"]}, "given twice"),
    ({"grouping": ["tenant"], "budgeting": "Timeslices", "timeslice_seconds": "1m",
      "timeslice_target": 0.9}, "only Occurrences"),
    ({"grouping": ["tenant"], "selector": {"labels": {"tenant": "a"}}}, "fixed value"),
    ({"grouping": ["outcome"], "sli": {"kind": "goodput"}}, "a goodput SLI splits by"),
    ({"grouping": ["tenant"], "sli": {"kind": "goodput", "tenant": "a"}},
     "already selects one tenant"),
], ids=["reserved-label", "twice", "timeslices", "pinned-by-selector", "goodput-label",
        "goodput-pinned"])
def test_a_split_that_cannot_be_is_refused(fields: dict[str, Any], error: str) -> None:
    spec = {"name": "x", "objective": 0.99, "sli": {"kind": "availability"}, **fields}
    with pytest.raises(ValueError, match=error):
        Slo.model_validate(spec)


def test_a_bad_split_in_a_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "slos.yaml"
    path.write_text("slos:\n  - {name: x, objective: 0.99, sli: {kind: availability},\n"
                    "     grouping: [severity]}\n")
    with pytest.raises(SloFileError, match="grouping") as raised:
        load_slos(path)
    assert str(path) in str(raised.value)


def test_only_the_busy_group_pages_in_the_scenarios() -> None:
    """Replayed: over clean traffic, the busy group's fault and no data, the only burn alerts
    are the busy group's, each with its label; the quiet group's edges say it stays quiet."""
    alerts = burn_alerts([GATEWAY, PER_MODEL])
    paging = {(a.labels["slo"], a.labels.get("tenant") or a.labels.get("model"),
               a.labels["window"]) for a in alerts}
    for slo in (GATEWAY, PER_MODEL):
        assert {g for s, g, _ in paging if s == slo.name} == {BUSY}
        assert (slo.name, BUSY, "1h/5m") in paging
    edges = [e for s in alert_scenarios([GATEWAY]) for e in s.edges]
    assert any(e.labels == (("tenant", QUIET),) and not e.firing for e in edges)
    assert any(e.labels == (("tenant", STEADY),) and not e.firing for e in edges)


def test_without_the_gate_the_quiet_tenant_pages() -> None:
    """The same traffic with min_events 0: a third of 3 requests an hour bad burns 33x, and
    the quiet tenant pages on its first bad request. The gate is what keeps it quiet."""
    clean = alert_scenarios([without_gate(GATEWAY)])[0]
    paging = {(a.labels["tenant"], a.labels["window"])
              for _, name, alerts in clean.test.alert_rule_tests if name == BURN_ALERT
              for a in alerts}
    assert (QUIET, "1h/5m") in paging
    assert {tenant for tenant, _ in paging} == {QUIET}


def test_the_checked_in_tests_page_the_busy_tenant_only() -> None:
    """The example's promtool tests, in alerts/tests (run by test_rules'
    test_promtool_runs_the_checked_in_tests), expect its pages from the busy tenant alone."""
    document = yaml.safe_load((ROOT / "alerts" / TEST_FILE).read_text())
    tenants = {(alert["exp_labels"]["tenant"], alert["exp_labels"]["window"])
               for test in document["tests"] for case in test["alert_rule_test"]
               for alert in case["exp_alerts"]
               if alert["exp_labels"]["slo"] == GATEWAY.name
               and case["alertname"] == BURN_ALERT}
    assert (BUSY, "1h/5m") in tenants and {t for t, _ in tenants} == {BUSY}
    names = [test["name"] for test in document["tests"]]
    assert any(GATEWAY.name in name for name in names if name.startswith("fault"))


@pytest.mark.integration
def test_promtool_pages_the_busy_model_only(tmp_path: Path) -> None:
    """The generated tests of the split engine SLO (the gateway's run from alerts/tests)."""
    rule_file, test_file = write_rules(tmp_path, [PER_MODEL])
    run_promtool("check", "rules", str(rule_file))
    assert "SUCCESS" in run_promtool("test", "rules", str(test_file))


@pytest.mark.integration
def test_promtool_pages_the_quiet_tenant_without_the_gate(tmp_path: Path) -> None:
    slos = [without_gate(GATEWAY)]
    rule_file = tmp_path / "rules.yml"
    rule_file.write_text(rules.generate_rules(slos))
    clean = alert_scenarios(slos)[0]
    test_file = tmp_path / "test.yml"
    test_file.write_text(promtool_test_file([rule_file.name], [clean.test],
                                            group_eval_order=group_eval_order(slos)))
    assert "SUCCESS" in run_promtool("test", "rules", str(test_file))
