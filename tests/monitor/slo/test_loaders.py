"""SLO spec files: native, OpenSLO v1 and Sloth load into the expected Slo; bad files name
the file, the document and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

import numpy as np
import yaml

from monitor.slo.evaluator import SloEvaluator
from monitor.slo.loaders import SloFileError, load_slos
from monitor.slo.rules import generate_rules
from monitor.slo.source import MinuteArraySource
from monitor.slo.windows import NO_DATA_ALERT
from monitor.slo.promql_forms import FormError, ratio_sli
from monitor.slo.spec import (
    AlertTemplate,
    AvailabilitySli,
    Budgeting,
    CounterQuery,
    ExplicitWindow,
    LatencySli,
    RatioSli,
    Selector,
    Slo,
    ThroughputSli,
    TimeWindow,
)

REPO_ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = REPO_ROOT / "alerts" / "slos"
DAY = 86400.0


def write(tmp_path: Path, text: str, name: str = "slos.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def by_name(slos: list[Slo]) -> dict[str, Slo]:
    return {slo.name: slo for slo in slos}


def load_error(path: Path) -> str:
    with pytest.raises(SloFileError) as caught:
        load_slos(path)
    return str(caught.value)


# --- native --------------------------------------------------------------------------------

def test_native_slos_validate_as_they_are(tmp_path: Path) -> None:
    path = write(tmp_path, """
slos:
  - name: chat-ttft
    objective: 0.99
    window: 30d
    sli: {kind: latency, metric: ttft, threshold_seconds: 200ms}
    selector: {target: ref-0}
  - name: slices
    objective: 0.9
    window: {calendar: week}
    sli: {kind: throughput, min_per_second: 20}
    budgeting: Timeslices
    timeslice_seconds: 5m
    alerting: {ticket: false, runbook_url: "https://runbooks/x"}
""")
    ttft, slices = load_slos(path)
    assert ttft == Slo(name="chat-ttft", objective=0.99,
                       window=TimeWindow(duration_seconds=30 * DAY),
                       sli=LatencySli(metric="ttft", threshold_seconds=0.2),
                       selector=Selector(target="ref-0"))
    assert slices.window.calendar == "week" and slices.budgeting is Budgeting.TIMESLICES
    assert slices.sli == ThroughputSli(min_per_second=20)
    assert slices.timeslice_seconds == 300
    assert (slices.alerting.page, slices.alerting.ticket) == (True, False)
    assert slices.alerting.runbook_url == "https://runbooks/x"


def test_several_documents_and_empty_ones(tmp_path: Path) -> None:
    path = write(tmp_path, """---
slos: [{name: a, objective: 0.9, sli: {kind: availability}}]
---
---
slos: [{name: b, objective: 0.95, sli: {kind: availability, errors: [oom]}}]
""")
    a, b = load_slos(path)
    assert (a.name, b.name) == ("a", "b")
    assert b.sli == AvailabilitySli(errors=("oom",))


# --- OpenSLO -------------------------------------------------------------------------------

OPENSLO = """
apiVersion: openslo/v1
kind: SLI
metadata: {name: ttft-sli}
spec:
  ratioMetric:
    counter: true
    good:
      metricSource:
        type: Prometheus
        spec:
          query: >-
            sum(rate(gen_ai_server_time_to_first_token_seconds_bucket{
              le="0.2", model="llama", deployment="prod"}[5m]))
    total:
      metricSource:
        type: Prometheus
        spec:
          query: >-
            sum(rate(gen_ai_server_time_to_first_token_seconds_count{
              deployment="prod",model="llama"}[5m]))
---
apiVersion: openslo/v1
kind: SLO
metadata:
  name: chat-ttft
  labels: {team: inference, tags: [chat, latency], userImpacting: true}
spec:
  description: first token fast
  service: chat
  indicatorRef: ttft-sli
  timeWindow: [{duration: 28d, isRolling: true}]
  budgetingMethod: Occurrences
  objectives:
    - {displayName: Strict Tier, target: 0.999}
    - {targetPercent: 99}
  alertPolicies:
    - alertPolicyRef: burn
---
apiVersion: openslo/v1
kind: AlertPolicy
metadata: {name: burn}
spec:
  alertWhenBreaching: true
  conditions:
    - conditionRef: fast
    - kind: AlertCondition
      metadata: {name: slow}
      spec:
        severity: warning
        condition: {kind: burnrate, op: gte, threshold: 3, lookbackWindow: 1d}
  notificationTargets: [{targetRef: oncall}]
---
apiVersion: openslo/v1
kind: AlertCondition
metadata: {name: fast}
spec:
  severity: critical
  condition: {kind: burnrate, op: gt, threshold: 14.4, lookbackWindow: 1h, alertAfter: 5m}
---
apiVersion: openslo/v1
kind: Service
metadata: {name: chat}
spec: {description: ignored}
"""


def test_openslo_slo_with_referenced_sli_and_alert_policy(tmp_path: Path) -> None:
    strict, second = load_slos(write(tmp_path, OPENSLO))
    assert (strict.name, second.name) == ("chat-ttft-strict-tier", "chat-ttft-1")
    assert (strict.objective, second.objective) == (0.999, 0.99)
    assert strict.sli == LatencySli(metric="ttft", threshold_seconds=0.2)
    assert strict.selector == Selector(labels={"model": "llama", "deployment": "prod"})
    assert (strict.service, strict.description) == ("chat", "first token fast")
    assert strict.window == TimeWindow(duration_seconds=28 * DAY)
    assert strict.budgeting is Budgeting.OCCURRENCES
    assert strict.labels == {"team": "inference", "tags": "chat,latency", "userImpacting": "true"}
    # The policy's name is the alert name; each condition's severity word its severity label.
    assert strict.alerting.windows == (
        ExplicitWindow(severity="page", long_seconds=3600, short_seconds=300, factor=14.4,
                       for_seconds=300, alert=AlertTemplate(
                           name="burn", labels={"severity": "critical"})),
        ExplicitWindow(severity="ticket", long_seconds=DAY, short_seconds=7200, factor=3,
                       alert=AlertTemplate(name="burn", labels={"severity": "warning"})),
    )


def test_imported_alerts_keep_their_authors_names_labels_and_annotations(
        tmp_path: Path) -> None:
    """The generated rules and the monitor's evaluator both raise the alerts as the Sloth and
    OpenSLO authors wrote them: name, severity label, labels, annotations, disabled pages."""
    sloth = {s.name: s for s in load_slos(EXAMPLES / "sloth-example.yaml")}
    openslo = load_slos(write(tmp_path, OPENSLO))[0]
    latency, timeouts = sloth["batch-e2e-latency"], sloth["batch-not-timed-out"]
    expected = {
        # slo: [(alertname, severity label, its extra labels and annotations)] per window
        latency.name: [("BatchLatencyHigh", "critical")] * 2 + [("BatchLatencyHigh",
                                                                  "warning")] * 2,
        timeouts.name: [("BatchTimeouts", "ticket")] * 2,  # page_alert: {disable: true}
        openslo.name: [("burn", "critical"), ("burn", "warning")],
    }
    steady = (np.full(60, 100.0), np.full(60, 100.0), np.ones(60, dtype=bool))
    source = MinuteArraySource(0, {name: steady for name in expected})
    statuses = SloEvaluator([latency, timeouts, openslo], source, settle_seconds=0).tick(3600.0)
    generated = yaml.safe_load(generate_rules([latency, timeouts, openslo]))
    rules = [r for g in generated["groups"] for r in g["rules"]
             if "alert" in r and r["alert"] != NO_DATA_ALERT]
    for status in statuses:
        burns = [c for c in status.conditions if c.labels["alertname"] != NO_DATA_ALERT]
        ours = [(c.labels["alertname"], c.labels["severity"]) for c in burns]
        theirs = [(r["alert"], r["labels"]["severity"]) for r in rules
                  if r["labels"].get("slo") == status.name]
        assert ours == theirs == expected[status.name]
    page = next(r for r in rules if r["alert"] == "BatchLatencyHigh")
    assert page["labels"]["category"] == "latency"  # alerting.labels
    assert page["annotations"]["runbook"] == "https://runbooks.example.com/inference/batch-latency"
    assert "burning its error budget" in page["annotations"]["summary"]  # ours stay beside


def test_openslo_counters_become_a_ratio_sli_with_shared_labels_as_selector(
        tmp_path: Path) -> None:
    [slo] = load_slos(write(tmp_path, """
apiVersion: openslo/v1
kind: SLO
metadata: {name: no-oom}
spec:
  indicator:
    metadata: {name: oom}
    spec:
      ratioMetric:
        counter: true
        bad:
          metricSource:
            type: Prometheus
            spec:
              query: >-
                sum(increase(gen_ai_server_request_errors_total{
                  model="m", error_type="oom"}[1h]))
        total:
          metricSource:
            type: prometheus
            spec: {query: 'gen_ai_server_requests_total{model="m",finish_reason="stop"}'}
  budgetingMethod: RatioTimeslices
  timeWindow:
    - {duration: 1w, isRolling: false,
       calendar: {startTime: "2024-01-01T00:00:00", timeZone: UTC}}
  objectives: [{target: 0.99, timeSliceWindow: 5}]
"""))
    assert slo.sli == RatioSli(
        bad=CounterQuery(metric="gen_ai_server_request_errors", labels={"error_type": "oom"}),
        total=CounterQuery(metric="gen_ai_server_requests", labels={"finish_reason": "stop"}))
    assert slo.selector == Selector(labels={"model": "m"})
    assert slo.window == TimeWindow(calendar="week")
    assert slo.budgeting is Budgeting.RATIO_TIMESLICES
    assert slo.timeslice_seconds == 300  # a bare number is minutes in OpenSLO


def test_openslo_threshold_metric_takes_the_threshold_from_each_objective(
        tmp_path: Path) -> None:
    fast, ok = load_slos(write(tmp_path, """
apiVersion: openslo/v1
kind: SLO
metadata: {name: e2e}
spec:
  indicator:
    spec:
      thresholdMetric:
        metricSource:
          type: Prometheus
          spec: {query: 'gen_ai_server_request_duration_seconds{model="m"}'}
  budgetingMethod: Timeslices
  objectives:
    - {displayName: fast, op: lte, value: 1, target: 0.9,
       timeSliceTarget: 0.95, timeSliceWindow: 1m}
    - {displayName: ok, op: lte, value: 5, target: 0.99,
       timeSliceTarget: 0.99, timeSliceWindow: 1m}
"""))
    assert (fast.name, ok.name) == ("e2e-fast", "e2e-ok")
    assert fast.sli == LatencySli(metric="e2e", threshold_seconds=1.0)
    assert ok.sli == LatencySli(metric="e2e", threshold_seconds=5.0)
    assert fast.selector.labels == {"model": "m"}
    assert (fast.timeslice_seconds, fast.timeslice_target) == (60, 0.95)


def test_openslo_inferwatch_metric_source_is_the_whole_sli(tmp_path: Path) -> None:
    [slo] = load_slos(write(tmp_path, """
apiVersion: openslo/v1
kind: SLO
metadata: {name: avail}
spec:
  indicator:
    spec:
      ratioMetric:
        good:
          metricSource:
            type: inferwatch
            spec: {kind: availability, errors: [oom, timeout], selector: {labels: {role: canary}}}
  budgetingMethod: Occurrences
  timeWindow: [{duration: 1M, calendar: {timeZone: Etc/UTC}}]
  objectives: [{target: 0.995}]
"""))
    assert slo.sli == AvailabilitySli(errors=("oom", "timeout"))
    assert slo.selector == Selector(labels={"role": "canary"})
    assert slo.window == TimeWindow(calendar="month")


def test_openslo_references_resolve_across_the_files_of_a_directory(tmp_path: Path) -> None:
    sli, slo = OPENSLO.split("---\napiVersion: openslo/v1\nkind: SLO")[0], OPENSLO
    write(tmp_path, sli, "a-sli.yaml")
    write(tmp_path, slo.replace("kind: SLI\nmetadata: {name: ttft-sli}",
                                "kind: SLI\nmetadata: {name: other-sli}"), "b-slo.yml")
    write(tmp_path, "not: a spec", "notes.txt")
    assert [s.name for s in load_slos(tmp_path)] == ["chat-ttft-strict-tier", "chat-ttft-1"]


# --- Sloth ---------------------------------------------------------------------------------

def test_sloth_latency_and_ratio_slos(tmp_path: Path) -> None:
    latency, errors = load_slos(write(tmp_path, """
version: prometheus/v1
service: chat
labels: {team: inference}
slos:
  - name: chat-e2e
    objective: 99.9
    description: fast enough
    labels: {tier: gold}
    sli:
      events:
        error_query: |
          (
            sum(rate(gen_ai_server_request_duration_seconds_count{model="m"}[{{.window}}]))
            -
            sum(rate(gen_ai_server_request_duration_seconds_bucket{le="5",model="m"}
                     [{{ .window }}]))
          )
        total_query: sum(rate(gen_ai_server_request_duration_seconds_count{model="m"}[{{.window}}]))
    alerting:
      name: ChatE2E
      annotations: {runbook: "https://runbooks/e2e"}
      page_alert: {labels: {severity: critical}}
      ticket_alert: {disable: true}
  - name: chat-errors
    objective: 99
    time_window: 28d
    sli:
      events:
        error_query: >-
          sum(rate(gen_ai_server_request_errors_total{error_type="timeout"}[{{.window}}]))
        total_query: sum(rate(gen_ai_server_requests_total[{{.window}}]))
"""))
    assert latency.sli == LatencySli(metric="e2e", threshold_seconds=5.0)
    assert (latency.objective, latency.service, latency.description) == (0.999, "chat",
                                                                       "fast enough")
    assert latency.selector == Selector(labels={"model": "m"})
    assert latency.labels == {"team": "inference", "tier": "gold"}
    assert latency.window == TimeWindow(duration_seconds=30 * DAY)  # Sloth's default period
    assert (latency.alerting.page, latency.alerting.ticket) == (True, False)
    assert latency.alerting.runbook_url == "https://runbooks/e2e"
    assert errors.sli == RatioSli(
        bad=CounterQuery(metric="gen_ai_server_request_errors", labels={"error_type": "timeout"}),
        total=CounterQuery(metric="gen_ai_server_requests"))
    assert errors.window == TimeWindow(duration_seconds=28 * DAY)
    assert errors.selector == Selector()


# --- the example files ---------------------------------------------------------------------

def test_the_example_files_load_with_unique_names() -> None:
    slos = by_name(load_slos(EXAMPLES))
    assert len(slos) == len(load_slos(EXAMPLES / "inference.yaml")) + len(
        load_slos(EXAMPLES / "openslo-example.yaml")) + len(
        load_slos(EXAMPLES / "sloth-example.yaml")) + len(
        load_slos(EXAMPLES / "gateway-tenants.yaml"))
    assert slos["gateway-goodput-per-tenant"].grouping == ("tenant",)
    assert slos["chat-ttft"].sli == LatencySli(metric="ttft", threshold_seconds=0.25)
    assert slos["chat-ttft"].window.duration_seconds == 30 * DAY
    assert slos["chat-availability"].sli == AvailabilitySli(
        errors=("oom", "timeout", "model_error", "rejected", "server_error"))
    assert slos["chat-availability"].objective == 0.999
    assert slos["chat-itl"].sli == LatencySli(metric="itl", threshold_seconds=0.05)
    assert slos["chat-itl"].window.duration_seconds == 28 * DAY
    decode = slos["decode-throughput"]
    assert decode.sli == ThroughputSli(metric="generation_tokens", min_per_second=50)
    assert (decode.budgeting, decode.timeslice_seconds, decode.objective) == (
        Budgeting.TIMESLICES, 60, 0.95)
    assert decode.window.duration_seconds == 7 * DAY
    assert slos["chat-e2e-monthly"].window == TimeWindow(calendar="month")
    assert slos["chat-e2e-monthly"].sli == LatencySli(metric="e2e", threshold_seconds=5.0)
    assert slos["chat-tpot"].sli == LatencySli(metric="tpot", threshold_seconds=0.1)
    assert len(slos["chat-tpot"].alerting.windows) == 2
    assert {"chat-oom-free-strict", "chat-oom-free-relaxed", "batch-availability",
            "batch-e2e-latency", "batch-not-timed-out"} <= slos.keys()
    assert all(slo.selector == Selector() for slo in slos.values())


# --- errors --------------------------------------------------------------------------------

def native(sli: str, extra: str = "", objective: str = "0.99") -> str:
    return f"slos:\n  - {{name: a, objective: {objective}, sli: {sli}{extra}}}\n"


@pytest.mark.parametrize(("text", "path", "message"), [
    (native("{kind: availability}", objective="1.5"), "slos[0].objective", "less than 1"),
    (native("{kind: speed}"), "slos[0].sli.kind", "unknown SLI kind 'speed'"),
    (native("{kind: latency, metric: ttft, threshold_seconds: 0.15}"),
     "slos[0].sli.threshold_seconds", "not a bucket edge"),
    (native("{kind: availability}", ", budgeting: Timeslices, timeslice_target: 0.9"),
     "slos[0]", "needs timeslice_seconds"),
    (native("{kind: availability}", ", windw: 30d"), "slos[0].windw", "did you mean 'window'"),
    ("slos: {name: a}", "slos", "expected a list"),
    ("kind: SLO\nname: x\n", "", "not an SLO spec"),
])
def test_native_errors_name_the_file_and_field(
        tmp_path: Path, text: str, path: str, message: str) -> None:
    error = load_error(write(tmp_path, text, "bad.yaml"))
    assert f"bad.yaml: invalid SLO spec:\n  {path}" in error
    assert message in error


def openslo_slo(indicator: str, objectives: str = "[{target: 0.99}]",
                budgeting: str = "Occurrences") -> str:
    return f"""apiVersion: openslo/v1
kind: SLI
metadata: {{name: unrelated}}
spec:
  ratioMetric: {{good: {{metricSource: {{type: inferwatch, spec: {{kind: availability}}}}}}}}
---
apiVersion: openslo/v1
kind: SLO
metadata: {{name: chat-ttft}}
spec:
  budgetingMethod: {budgeting}
  objectives: {objectives}
{indicator}
"""


def prometheus(good: str, total: str) -> str:
    return f"""  indicator:
    spec:
      ratioMetric:
        good: {{metricSource: {{type: Prometheus, spec: {{query: '{good}'}}}}}}
        total: {{metricSource: {{type: Prometheus, spec: {{query: '{total}'}}}}}}"""


TTFT_COUNT = "sum(rate(gen_ai_server_time_to_first_token_seconds_count[5m]))"
GOOD_QUERY = "spec.indicator.spec.ratioMetric.good.metricSource.spec.query"


@pytest.mark.parametrize(("text", "path", "message"), [
    (openslo_slo(prometheus(
        "histogram_quantile(0.99, sum(rate(gen_ai_server_time_to_first_token_seconds_bucket[5m])) "
        "by (le))", TTFT_COUNT)),
     GOOD_QUERY, "cannot read 'histogram_quantile(0.99, "),
    (openslo_slo(prometheus(
        'sum(rate(gen_ai_server_time_to_first_token_seconds_bucket{le="0.15"}[5m]))',
        TTFT_COUNT)), GOOD_QUERY, "threshold 0.15s is not a bucket edge"),
    (openslo_slo(prometheus("sum by (model) (rate(gen_ai_server_requests_total[5m]))",
                            "sum(rate(gen_ai_server_requests_total[5m]))")),
     GOOD_QUERY, "sum by/without is not supported"),
    (openslo_slo(prometheus("sum(rate(gen_ai_server_requests_running[5m]))",
                            "sum(rate(gen_ai_server_requests_total[5m]))")),
     GOOD_QUERY, "is a gauge"),
    (openslo_slo("  indicatorRef: chat-ttft-sli"), "spec.indicatorRef",
     "no SLI named 'chat-ttft-sli'"),
    (openslo_slo("  indicatorRef: unrelated", objectives="[{target: 1.5}]"),
     "spec.objectives[0].target", "less than 1"),
    (openslo_slo("  indicatorRef: unrelated", budgeting="Timeslices"),
     "spec.objectives[0].timeSliceWindow", "required with budgetingMethod Timeslices"),
    (openslo_slo("  indicatorRef: unrelated", budgeting="Timeslices",
                 objectives="[{target: 0.9, timeSliceWindow: 1m}]"),
     "spec.objectives[0]", "needs timeslice_target"),
    (openslo_slo("  indicator: {spec: {ratioMetric: {good: {metricSource: {type: inferwatch, "
                 "spec: {kind: fast}}}}}}"),
     "spec.indicator.spec.ratioMetric.good.metricSource.spec.kind", "unknown SLI kind 'fast'"),
    (openslo_slo("  indicatorRef: unrelated\n  timeWindow: [{duration: 1M, isRolling: true}]"),
     "spec.timeWindow[0].duration", "has no fixed length"),
    (openslo_slo("  indicatorRef: unrelated\n  timeWindow: [{duration: 1M, calendar: "
                 "{startTime: 2024-01-15 00:00:00}}]"),
     "spec.timeWindow[0].calendar.startTime", "begin at 00:00 on the 1st"),
    (openslo_slo("  indicatorRef: unrelated\n  alertPolicies: [{alertPolicyRef: nope}]"),
     "spec.alertPolicies[0].alertPolicyRef", "no AlertPolicy named 'nope'"),
])
def test_openslo_errors_name_the_document_and_field(
        tmp_path: Path, text: str, path: str, message: str) -> None:
    error = load_error(write(tmp_path, text, "openslo.yaml"))
    assert f"openslo.yaml: invalid SLO spec:\n  document 2 (SLO chat-ttft): {path}: " in error
    assert message in error


def test_an_error_in_a_referenced_sli_is_reported_where_the_sli_is(tmp_path: Path) -> None:
    text = openslo_slo("  indicatorRef: unrelated").replace("kind: availability",
                                                            "kind: availability, errors: [oops]")
    error = load_error(write(tmp_path, text, "openslo.yaml"))
    assert ("document 1 (SLI unrelated): spec.ratioMetric.good.metricSource.spec.errors: "
            "unknown error types ['oops']") in error


@pytest.mark.parametrize(("sli", "path", "message"), [
    ("{raw: {error_ratio_query: 'x'}}", "slos[0].sli.raw", "cannot be read"),
    ("{events: {error_query: 'sum(rate(gen_ai_server_request_errors_total"
     "{error_type=~\"oom|timeout\"}[{{.window}}]))', "
     "total_query: 'sum(rate(gen_ai_server_requests_total[{{.window}}]))'}}",
     "slos[0].sli.events.error_query", "only equality matchers"),
    ("{events: {error_query: 'sum(rate(gen_ai_server_request_duration_seconds_bucket{le=\"5\"}"
     "[{{.window}}]))', total_query: 'sum(rate(gen_ai_server_request_duration_seconds_count"
     "[{{.window}}]))'}}",
     "slos[0].sli.events.error_query", "_count - gen_ai_server_request_duration_seconds_bucket"),
])
def test_sloth_errors_name_the_field(tmp_path: Path, sli: str, path: str, message: str) -> None:
    text = f"version: prometheus/v1\nservice: s\nslos:\n  - {{name: a, objective: 99, sli: {sli}}}"
    error = load_error(write(tmp_path, text, "sloth.yaml"))
    assert f"sloth.yaml: invalid SLO spec:\n  {path}: " in error
    assert message in error


def test_a_duplicate_name_across_files_names_both_places(tmp_path: Path) -> None:
    write(tmp_path, native("{kind: availability}"), "a.yaml")
    write(tmp_path, "slos:\n  - {name: b, objective: 0.9, sli: {kind: availability}}\n"
                    "  - {name: a, objective: 0.9, sli: {kind: availability}}\n", "b.yaml")
    error = load_error(tmp_path)
    assert error.startswith(f"{tmp_path / 'b.yaml'}: invalid SLO spec:\n")
    assert (f"  slos[1].name: duplicate SLO name 'a', first defined in {tmp_path / 'a.yaml'}: "
            "slos[0].name") in error


def test_a_yaml_syntax_error_gives_the_file_and_line(tmp_path: Path) -> None:
    error = load_error(write(tmp_path, "slos:\n  - name: a\n  objective: 0.9\n", "broken.yaml"))
    assert "broken.yaml: invalid SLO spec:\n  not valid YAML at line 3, column 3" in error


def test_problems_of_several_files_are_reported_together(tmp_path: Path) -> None:
    write(tmp_path, native("{kind: availability}", objective="2"), "a.yaml")
    write(tmp_path, "slos: [\n", "b.yaml")
    with pytest.raises(SloFileError) as caught:
        load_slos(tmp_path)
    assert caught.value.source == str(tmp_path)
    assert [p.split(": ")[0] for p in caught.value.problems] == [
        str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")]


def test_a_missing_path_is_an_error(tmp_path: Path) -> None:
    assert "no such file or directory" in load_error(tmp_path / "nope.yaml")


# --- the restricted PromQL -----------------------------------------------------------------

@pytest.mark.parametrize("good", [
    'gen_ai_server_inter_token_latency_seconds_bucket{le="0.05"}',
    'sum(increase(gen_ai_server_inter_token_latency_seconds_bucket{le="0.05"}[1h]))',
    "(rate(gen_ai_server_inter_token_latency_seconds_bucket{le='0.05',}[30s]))",
])
def test_accepted_latency_forms(good: str) -> None:
    form = ratio_sli("gen_ai_server_inter_token_latency_seconds_count", good=good)
    assert form.sli == {"kind": "latency", "metric": "itl", "threshold_seconds": 0.05}


@pytest.mark.parametrize(("good", "total", "role", "message"), [
    ("gen_ai_server_requests_total{finish_reason=\"stop\"} / 2",
     "gen_ai_server_requests_total", "good", "unexpected '/ 2'"),
    ("rate(gen_ai_server_requests_total)", "gen_ai_server_requests_total", "good",
     "expected '['"),
    ("gen_ai_server_requests_total", "gen_ai_server_time_to_first_token_seconds_bucket{le=\"1\"}",
     "total", "_count"),
    ("gen_ai_server_requests_total", "nope_total", "total", "not a metric of the inferwatch"),
    ('gen_ai_server_time_to_first_token_seconds_bucket{le="+Inf"}',
     "gen_ai_server_time_to_first_token_seconds_count", "good", "finite bucket bound"),
    ('gen_ai_server_time_to_first_token_seconds_bucket{le="1",model="a"}',
     'gen_ai_server_time_to_first_token_seconds_count{model="b"}', "good", "differ"),
    ('gen_ai_server_request_queue_time_seconds_bucket{le="1"}',
     "gen_ai_server_request_queue_time_seconds_count", "total", "has no latency SLI"),
])
def test_refused_forms_say_which_query_and_why(
        good: str, total: str, role: str, message: str) -> None:
    with pytest.raises(FormError) as caught:
        ratio_sli(total, good=good)
    assert caught.value.role == role
    assert message in str(caught.value)
