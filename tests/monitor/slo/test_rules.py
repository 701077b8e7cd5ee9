"""Generated Prometheus SLO rules: their PromQL, promtool's verdict on them, and the CLI.

promtool (Prometheus 2.x, /usr/bin/promtool from the Debian package) checks the rule files
and runs the generated unit tests; without it those tests skip, or fail where
INFERWATCH_REQUIRE_INTEGRATION=1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor import cli
from monitor.slo import rules
from monitor.slo.promtool_tests import (
    ExpectedAlert,
    PromtoolTest,
    alert_scenarios,
    expand_values,
    generate_alert_tests,
    promtool_test_file,
)
from monitor.slo.rules_cli import RULES_FILE, TEST_FILE
from monitor.slo.spec import Slo
from monitor.slo.windows import BURN_ALERT, NO_DATA_ALERT, alert_labels, burn_windows
from tests.integration import unavailable

ROOT = Path(__file__).resolve().parents[3]
CHECKED_IN_SLOS = ROOT / "alerts" / "slos"


def slo(name: str, **fields: Any) -> Slo:
    spec: dict[str, Any] = {"name": name, "objective": 0.999, "sli": {"kind": "availability"}}
    spec.update(fields)
    return Slo.model_validate(spec)


# Every SLI kind and budgeting method, rolling and calendar periods, explicit windows with
# `for`, min_events, runbook and dashboard links, selectors by target and by labels.
OCCURRENCES = [
    slo("chat-availability", selector={"target": "llm"}, labels={"team": "inference"},
        alerting={"runbook_url": "https://runbooks.example.com/avail",
                  "dashboard_url": "https://grafana.example.com/d/slo"}),
    slo("chat-ttft", objective=0.99, window={"calendar": "month"},
        sli={"kind": "latency", "metric": "ttft", "threshold_seconds": "1s"},
        alerting={"min_events": 100}),
    slo("rejections", objective=0.995, window={"calendar": "week"},
        sli={"kind": "availability", "errors": ["rejected", "bad_request"]},
        alerting={"ticket": False}),
    slo("steps-not-preempted", objective=0.99, selector={"labels": {"model": "m2"}},
        sli={"kind": "ratio", "bad": {"metric": "gen_ai_server_preemptions"},
             "total": {"metric": "gen_ai_server_engine_steps_total"}}),
]
SLICED = [
    slo("e2e-slices", objective=0.99, budgeting="Timeslices", timeslice_seconds="5m",
        timeslice_target=0.95, selector={"labels": {"model": "m1"}},
        sli={"kind": "latency", "metric": "e2e", "threshold_seconds": 5}),
    slo("tokens", objective=0.95, window="7d", budgeting="Timeslices", timeslice_seconds="5m",
        sli={"kind": "throughput", "metric": "tokens", "min_per_second": 50}),
    slo("finished", objective=0.98, budgeting="RatioTimeslices", timeslice_seconds="10m",
        sli={"kind": "ratio",
             "good": {"metric": "gen_ai_server_requests", "labels": {"finish_reason": "stop"}},
             "total": {"metric": "gen_ai_server_requests"}},
        alerting={"windows": [{"severity": "page", "long_seconds": "1h",
                               "short_seconds": "5m", "factor": 10, "for_seconds": "2m"}]}),
]
ALL = OCCURRENCES + SLICED


def promtool() -> str:
    path = shutil.which("promtool") or ("/usr/bin/promtool"
                                        if os.access("/usr/bin/promtool", os.X_OK) else None)
    if path is None:
        unavailable("promtool is not installed (apt-get install prometheus)")
    return path


def run_promtool(*args: str) -> str:
    done = subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-8000:]
    assert "WARNING" not in output, output  # e.g. a rule file that matched nothing
    return output


def write_rules(directory: Path, slos: Sequence[Slo]) -> tuple[Path, Path]:
    """The rule file and the generated test file, laid out as `rules generate` does."""
    rule_file, test_file = directory / RULES_FILE, directory / TEST_FILE
    test_file.parent.mkdir(parents=True, exist_ok=True)
    rule_file.write_text(rules.generate_rules(slos))
    test_file.write_text(generate_alert_tests(slos))
    return rule_file, test_file


# --- PromQL ------------------------------------------------------------------------------

def test_events_promql_per_sli_kind() -> None:
    availability, ttft, rejections, ratio = OCCURRENCES
    assert rules.events_promql(availability, 300) == (
        '(sum(increase(gen_ai_server_request_errors_total{job="llm",'
        'error_type=~"model_error|oom|rejected|server_error|timeout"}[5m])) or vector(0))',
        'sum(increase(gen_ai_server_requests_total{job="llm"}[5m])) + '
        '(sum(increase(gen_ai_server_request_errors_total{job="llm",'
        'error_type=~"rejected|server_error"}[5m])) or vector(0))')
    assert rules.events_promql(ttft, 3600) == (
        "sum(increase(gen_ai_server_time_to_first_token_seconds_count[1h])) - "
        'sum(increase(gen_ai_server_time_to_first_token_seconds_bucket{le="1.0"}[1h]))',
        "sum(increase(gen_ai_server_time_to_first_token_seconds_count[1h]))")
    assert rules.events_promql(rejections, 300)[1] == (
        "sum(increase(gen_ai_server_requests_total[5m])) + "
        '(sum(increase(gen_ai_server_request_errors_total{error_type=~"bad_request|rejected"}'
        "[5m])) or vector(0))")
    assert rules.events_promql(ratio, 300) == (
        '(sum(increase(gen_ai_server_preemptions_total{model="m2"}[5m])) or vector(0))',
        'sum(increase(gen_ai_server_engine_steps_total{model="m2"}[5m]))')
    finished = SLICED[2]
    assert rules.events_promql(finished, 600)[0] == (
        "sum(increase(gen_ai_server_requests_total[10m])) - "
        'sum(increase(gen_ai_server_requests_total{finish_reason="stop"}[10m]))')


def test_availability_without_pre_engine_errors_counts_requests_only() -> None:
    spec = slo("oom-only", sli={"kind": "availability", "errors": ["oom"]})
    assert rules.events_promql(spec, 60)[1] == (
        "sum(increase(gen_ai_server_requests_total[1m]))")


def test_latency_le_is_written_as_prometheus_client_exposes_it() -> None:
    for threshold, le in (("200ms", "0.2"), ("1s", "1.0"), ("5s", "5.0"), ("60s", "60.0")):
        spec = slo("lat", sli={"kind": "latency", "metric": "e2e", "threshold_seconds": threshold})
        assert f'le="{le}"' in rules.events_promql(spec, 60)[0]


def test_slice_values() -> None:
    e2e, tokens, finished = SLICED
    assert rules.slice_promql(e2e).endswith(">= bool 0.95")
    assert rules.slice_promql(e2e).startswith("1 - (sum(increase(")
    assert rules.slice_promql(tokens) == (
        "sum(rate(gen_ai_server_prompt_tokens_total[5m])) + "
        "sum(rate(gen_ai_server_generation_tokens_total[5m])) >= bool 50")
    assert "bool" not in rules.slice_promql(finished)
    assert rules.slice_record(e2e) == "inferwatch_slo:slice_good:bool5m"
    assert rules.slice_record(finished) == "inferwatch_slo:slice_good:ratio10m"


def test_selector_target_label_is_configurable() -> None:
    bad, total = rules.events_promql(OCCURRENCES[0], 300, target_label="instance")
    assert 'instance="llm"' in bad and 'instance="llm"' in total and "job=" not in bad


def test_label_values_are_escaped() -> None:
    spec = slo("odd", selector={"labels": {"model": 'a"b\\c'}})
    assert 'model="a\\"b\\\\c"' in rules.events_promql(spec, 60)[1]


# --- the rule file -------------------------------------------------------------------------

def load(text: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def group(text: str, name: str) -> dict[str, Any]:
    return next(g for g in load(text)["groups"] if g["name"] == name)


def test_rule_file_is_deterministic_and_ordered_by_slo_name() -> None:
    text = rules.generate_rules(ALL)
    assert text == rules.generate_rules(list(reversed(ALL)))
    assert text.startswith("# Generated by `inferwatch rules generate`")
    names = [g["name"] for g in load(text)["groups"]]
    assert names == ["inferwatch-slo-chat-availability", "inferwatch-slo-chat-ttft",
                     "inferwatch-slo-e2e-slices-slices", "inferwatch-slo-e2e-slices",
                     "inferwatch-slo-finished-slices", "inferwatch-slo-finished",
                     "inferwatch-slo-rejections", "inferwatch-slo-steps-not-preempted",
                     "inferwatch-slo-tokens-slices", "inferwatch-slo-tokens",
                     "inferwatch-target-down"]  # last, whatever the SLOs


def test_occurrence_records_and_alerts() -> None:
    text = rules.generate_rules(OCCURRENCES, interval_seconds=30)
    g = group(text, "inferwatch-slo-chat-availability")
    assert g["interval"] == "30s"
    records = {r["record"]: r for r in g["rules"] if "record" in r}
    windows = ["5m", "30m", "1h", "2h", "6h", "1d", "3d", "30d"]
    for w in windows:
        for name in ("sli_errors:increase", "sli_events:increase", "error_ratio:ratio_rate"):
            assert records[f"inferwatch_slo:{name}{w}"]["labels"] == {"slo": "chat-availability"}
    assert records["inferwatch_slo:error_ratio:ratio_rate1h"]["expr"] == (
        'inferwatch_slo:sli_errors:increase1h{slo="chat-availability"} / '
        '(inferwatch_slo:sli_events:increase1h{slo="chat-availability"} > 0)')
    assert records["inferwatch_slo:error_budget_remaining:ratio30d"]["expr"] == (
        '1 - inferwatch_slo:error_ratio:ratio_rate30d{slo="chat-availability"} / 0.001')
    alerts = [r for r in g["rules"] if "alert" in r]
    assert [(a["alert"], a["labels"]["window"], a["labels"]["severity"]) for a in alerts] == [
        (BURN_ALERT, "1h/5m", "page"), (BURN_ALERT, "6h/30m", "page"),
        (BURN_ALERT, "1d/2h", "ticket"), (BURN_ALERT, "3d/6h", "ticket"),
        (NO_DATA_ALERT, "15m", "ticket")]
    page = alerts[0]
    assert page["expr"] == (
        'inferwatch_slo:error_ratio:ratio_rate1h{slo="chat-availability"} / 0.001 > 14.4 and '
        'inferwatch_slo:error_ratio:ratio_rate5m{slo="chat-availability"} / 0.001 > 14.4')
    assert "for" not in page
    assert page["labels"] == {"service": "inference", "severity": "page",
                              "slo": "chat-availability", "team": "inference",
                              "window": "1h/5m"}
    assert page["annotations"]["runbook_url"] == "https://runbooks.example.com/avail"
    assert page["annotations"]["dashboard_url"] == "https://grafana.example.com/d/slo"
    assert page["annotations"]["burn_rate"] == '{{ printf "%.2f" $value }}'
    assert alerts[-1]["expr"] == (
        'sum(absent_over_time(gen_ai_server_requests_total{job="llm"}[15m]))')


def test_min_events_calendar_and_page_only() -> None:
    text = rules.generate_rules(OCCURRENCES)
    ttft = [r for r in group(text, "inferwatch-slo-chat-ttft")["rules"] if "alert" in r]
    assert ttft[0]["expr"].endswith(
        ' and inferwatch_slo:sli_events:increase1h{slo="chat-ttft"} >= 100')
    assert ("# Calendar month: Prometheus cannot align a range to the start of a month, so "
            "the period is recorded over the nominal 30d") in text
    records = [r["record"] for r in group(text, "inferwatch-slo-rejections")["rules"]
               if "record" in r]
    assert "inferwatch_slo:error_ratio:ratio_rate1w" in records  # calendar week: nominal 7d
    windows = [r["labels"]["window"] for r in group(text, "inferwatch-slo-rejections")["rules"]
               if r.get("alert") == BURN_ALERT]
    assert windows == ["14m/2m", "1h24m/7m"]  # a week scales the 30-day windows by 7/30


def test_sliced_groups() -> None:
    text = rules.generate_rules(SLICED)
    slices = group(text, "inferwatch-slo-finished-slices")
    assert slices["interval"] == "10m"
    assert [r["record"] for r in slices["rules"]] == ["inferwatch_slo:slice_good:ratio10m"]
    main = group(text, "inferwatch-slo-finished")["rules"]
    records = {r["record"]: r["expr"] for r in main if "record" in r}
    assert records["inferwatch_slo:error_ratio:ratio_rate5m"] == (  # at least one slice
        '1 - sum_over_time(inferwatch_slo:slice_good:ratio10m{slo="finished"}[10m]) / '
        'count_over_time(inferwatch_slo:slice_good:ratio10m{slo="finished"}[10m])')
    assert records["inferwatch_slo:sli_events:count_over_time1h"] == (
        'count_over_time(inferwatch_slo:slice_good:ratio10m{slo="finished"}[1h])')
    page = next(r for r in main if r.get("alert") == BURN_ALERT)
    assert page["for"] == "2m"
    assert page["expr"] == (
        'inferwatch_slo:error_ratio:ratio_rate1h{slo="finished"} / 0.02 > 10 and '
        'inferwatch_slo:error_ratio:ratio_rate5m{slo="finished"} / 0.02 > 10')


@pytest.mark.integration
def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    path = tmp_path / RULES_FILE
    text = rules.generate_rules(ALL)
    path.write_text(text)
    count = sum(len(g["rules"]) for g in load(text)["groups"])
    assert f"SUCCESS: {count} rules found" in run_promtool("check", "rules", str(path))


# --- the generated promtool tests -----------------------------------------------------

def test_expanding_notation() -> None:
    assert expand_values([0, 10, 20, 25, 30, 30]) == "0+10x2 25+5x1 30"
    assert expand_values([0.0, 0.0, 0.0]) == "0+0x2"
    assert expand_values([7]) == "7"


def test_scenarios_show_the_workbook_detection_times() -> None:
    """Each fault scenario's expectations (the rules replayed) agree with the workbook: no
    page one interval before its detection time, firing one interval (and a slice) after,
    resolved once the short window is clean; nothing fires on clean traffic; no-data fires
    after no_data_after, not before."""
    scenarios = alert_scenarios(ALL)
    clean = scenarios[0]
    assert clean.test.name.startswith("clean")
    assert all(not expected for _, _, expected in clean.test.alert_rule_tests)
    checked = set()
    for scenario in scenarios:
        expected = {(t, name): alerts for t, name, alerts in scenario.test.alert_rule_tests}
        for edge in scenario.edges:
            firing = any(a.labels["slo"] == edge.slo and a.labels["window"] == edge.window
                         and all(a.labels.get(k) == v for k, v in edge.labels)
                         for a in expected[(edge.seconds, edge.alertname)])
            assert firing == edge.firing, (scenario.test.name, edge)
            checked.add((edge.slo, edge.alertname, edge.firing))
    for spec in ALL:  # every SLO shown firing and quiet, for its burn and its no data
        for alertname in (BURN_ALERT, NO_DATA_ALERT):
            assert {(spec.name, alertname, True), (spec.name, alertname, False)} <= checked


def test_fault_edges_for_a_999_availability_slo() -> None:
    """51.84 s to detect 100% errors at 99.9% over 1h/5m: quiet at the fault's start,
    firing 2 minutes in."""
    scenario = next(s for s in alert_scenarios(ALL)
                    if "chat-availability" in s.test.name and s.test.name.startswith("fault"))
    edges = [(e.seconds, e.firing) for e in scenario.edges
             if e.slo == "chat-availability" and e.window == "1h/5m"]
    assert edges[:2] == [(6 * 3600, False), (6 * 3600 + 120, True)]
    page = burn_windows(OCCURRENCES[0])[0]
    assert page.detection_seconds(1.0, OCCURRENCES[0].error_budget) == pytest.approx(51.84)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("slos", [OCCURRENCES, SLICED], ids=["occurrences", "sliced"])
def test_promtool_runs_the_generated_tests(tmp_path: Path, slos: list[Slo]) -> None:
    """The rules compute what the replay predicts: every alert fires and resolves when
    designed, labels and rendered annotations included."""
    rule_file, test_file = write_rules(tmp_path, slos)
    run_promtool("check", "rules", str(rule_file))
    assert "SUCCESS" in run_promtool("test", "rules", str(test_file))


# --- by hand ---------------------------------------------------------------------------

def rendered(spec: Slo, window: str, burn: float, remaining: str,
             exhaustion: str) -> ExpectedAlert:
    w = next(w for w in burn_windows(spec) if w.name == window)
    annotations = rules.burn_annotations(spec, w)
    annotations["summary"] = annotations["summary"].replace('{{ printf "%.1f" $value }}',
                                                            f"{burn:.1f}")
    annotations.update(burn_rate=f"{burn:.2f}", budget_remaining=remaining,
                       time_to_exhaustion=exhaustion)
    return ExpectedAlert(alert_labels(spec, w.severity.value, window), annotations)


@pytest.mark.integration
def test_hand_computed_availability_fault(tmp_path: Path) -> None:
    """99.9% availability, 100 requests a minute for 6h, then every request a timeout for
    10 minutes, then good again. The 1h/5m page needs 51.84 s: quiet at 6h, firing at 6h2m
    (burn 200/6000 / 0.001 = 33.33); resolved at 6h16m once the 5m window is clean, while
    the 6h/30m page (1000/36000 / 0.001 = 27.78) and the tickets still fire."""
    spec = slo("avail", selector={"target": "llm"})
    (tmp_path / RULES_FILE).write_text(rules.generate_rules([spec]))
    stop = '{finish_reason="stop",job="llm"}'
    failed = "0+0x360 100+100x9 1000+0x29"
    series = [
        (f"gen_ai_server_requests_total{stop}", "0+100x360 36000+0x9 36100+100x29"),
        ('gen_ai_server_requests_total{finish_reason="error",job="llm"}', failed),
        ('gen_ai_server_request_errors_total{error_type="timeout",job="llm"}', failed),
    ]
    at_6h2m = 1 - (200 / 36200) / 0.001     # period: 200 errors of 36200 requests
    at_6h16m = 1 - (1000 / 37600) / 0.001
    assert (f"{at_6h2m * 100:.4g}%", f"{at_6h16m * 100:.4g}%") == ("-452.5%", "-2560%")
    burn_1d_6h2m = (200 / 36200) / 0.001  # 1d and 3d windows hold the whole history
    burn_1d_6h16m = (1000 / 37600) / 0.001
    tests = [
        (6 * 3600.0, BURN_ALERT, []),
        (6 * 3600.0 + 120, BURN_ALERT, [
            rendered(spec, "1h/5m", 33.333333, "-452.5%", "exhausted"),
            rendered(spec, "1d/2h", burn_1d_6h2m, "-452.5%", "exhausted"),
            rendered(spec, "3d/6h", burn_1d_6h2m, "-452.5%", "exhausted")]),
        (6 * 3600.0 + 16 * 60, BURN_ALERT, [
            rendered(spec, "6h/30m", 1000 / 36000 / 0.001, "-2560%", "exhausted"),
            rendered(spec, "1d/2h", burn_1d_6h16m, "-2560%", "exhausted"),
            rendered(spec, "3d/6h", burn_1d_6h16m, "-2560%", "exhausted")]),
        (6 * 3600.0 + 16 * 60, NO_DATA_ALERT, []),
    ]
    test_file = tmp_path / "tests" / "hand.test.yml"
    test_file.parent.mkdir()
    test_file.write_text(promtool_test_file(
        [f"../{RULES_FILE}"], [PromtoolTest(60.0, series, tests, "by hand")]))
    run_promtool("test", "rules", str(test_file))


@pytest.mark.integration
def test_hand_computed_no_data(tmp_path: Path) -> None:
    """Samples until 30m, then none: absent_over_time over 15m is still satisfied at 45m
    (the 30m sample is inside the closed range), not at 46m."""
    spec = slo("avail", selector={"target": "llm"})
    (tmp_path / RULES_FILE).write_text(rules.generate_rules([spec]))
    series = [('gen_ai_server_requests_total{finish_reason="stop",job="llm"}', "0+100x30")]
    labels = alert_labels(spec, "ticket", "15m")
    tests = [(45 * 60.0, NO_DATA_ALERT, []),
             (46 * 60.0, NO_DATA_ALERT,
              [ExpectedAlert(labels, rules.no_data_annotations(spec))])]
    test_file = tmp_path / "hand.test.yml"
    test_file.write_text(promtool_test_file(
        [RULES_FILE], [PromtoolTest(60.0, series, tests, "no data by hand")]))
    run_promtool("test", "rules", str(test_file))


# --- the command ----------------------------------------------------------------------------

def write_specs(path: Path, slos: Sequence[Slo]) -> None:
    specs = []
    for spec in slos:
        fields = spec.model_dump(mode="json", exclude_defaults=True)
        fields["sli"]["kind"] = spec.sli.kind  # a default, but the discriminator
        specs.append(fields)
    path.write_text(yaml.safe_dump({"slos": specs}, sort_keys=False))


def test_generate_then_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    specs, out = tmp_path / "slos.yaml", tmp_path / "alerts"
    write_specs(specs, OCCURRENCES[:2])
    argv = ["rules", "generate", "--slos", str(specs), "--out", str(out)]
    assert cli.main(argv) == 0
    assert (out / RULES_FILE).read_text() == rules.generate_rules(OCCURRENCES[:2])
    test_text = (out / TEST_FILE).read_text()
    assert load(test_text)["rule_files"] == [f"../{RULES_FILE}"]
    assert cli.main([*argv, "--check"]) == 0
    capsys.readouterr()

    write_specs(specs, OCCURRENCES[:1])
    assert cli.main([*argv, "--check"]) == 1
    captured = capsys.readouterr()
    assert f"--- {out / RULES_FILE}" in captured.out
    assert "-- SLO chat-ttft" not in captured.out and "-# SLO chat-ttft" in captured.out
    assert "out of date" in captured.err
    assert (out / RULES_FILE).read_text() == rules.generate_rules(OCCURRENCES[:2])  # untouched


def test_generate_refuses_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    specs = tmp_path / "slos.yaml"
    specs.write_text("slos:\n  - {name: x, objective: 2, sli: {kind: availability}}\n")
    assert cli.main(["rules", "generate", "--slos", str(specs), "--out",
                     str(tmp_path / "out")]) == 2
    assert "objective" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    write_specs(specs, OCCURRENCES[:1])
    assert cli.main(["rules", "generate", "--slos", str(specs), "--interval", "soon"]) == 2


def checked_in_slos() -> Path:
    if not any(CHECKED_IN_SLOS.glob("*.y*ml")):
        pytest.skip(f"{CHECKED_IN_SLOS} has no SLO specs yet (written by the SLO loader work)")
    return CHECKED_IN_SLOS


def test_checked_in_rules_are_current(capsys: pytest.CaptureFixture[str]) -> None:
    slos = checked_in_slos()
    status = cli.main(["rules", "generate", "--check", "--slos", str(slos),
                       "--out", str(ROOT / "alerts")])
    assert status == 0, capsys.readouterr().out[-4000:]


@pytest.mark.integration
@pytest.mark.slow
def test_promtool_runs_the_checked_in_tests() -> None:
    checked_in_slos()
    run_promtool("check", "rules", str(ROOT / "alerts" / RULES_FILE))
    run_promtool("test", "rules", str(ROOT / "alerts" / TEST_FILE))
