"""The target-down alert: its life in the monitor's own loop (scrapes written to a real store,
rounds at times the test chooses), and the generated Prometheus rule firing and resolving at
the same evaluations on the same outage (promtool)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
import yaml

from monitor import cli
from monitor.alerting.alertmanager import AmAlert
from monitor.alerting.book import AlertBook, AlertState
from monitor.alerting.loop import AlertingLoop
from monitor.alerting.target_down import TargetDownMonitor
from monitor.collect.config import MonitorConfig, parse_config
from monitor.collect.snapshot import Snapshot, TargetState
from monitor.collect.target_down_config import TARGET_DOWN_ALERT, TargetDownConfig
from monitor.slo.rules import generate_rules
from monitor.slo.rules_cli import RULES_FILE, TARGET_DOWN_TEST_FILE
from monitor.slo.target_down_promtool import generate_target_down_tests, outage
from monitor.slo.target_down_rules import TargetDownRule
from monitor.store import Store
from tests.monitor.slo.test_rules import ROOT, run_promtool

T0 = 1_800_000_000.0  # every time below is seconds after it
STEP = 15.0           # scrape and evaluation interval
ERROR = "cannot connect: Connection refused"


def config(settings: str = "", targets: Iterable[str] = ("ref",)) -> MonitorConfig:
    lines = ["targets:"] + [f"  - {{name: {t}, url: 'http://127.0.0.1:9/metrics'}}"
                            for t in targets]
    if settings:
        lines.append(f"alerting: {{target_down: {settings}}}")
    return parse_config("\n".join(lines) + "\n", "inferwatch.yaml")


def scrapes(store: Store, target: str, times: Iterable[float], up: Callable[[float], bool],
            interval: float = STEP) -> None:
    """One scrape of ``target`` at each time (seconds after T0), up or failing."""
    store.write([Snapshot(target, T0 + t - interval, T0 + t,
                          TargetState.UP if up(t) else TargetState.DOWN,
                          None if up(t) else ERROR) for t in times])


def grid(start: float, end: float, step: float = STEP) -> list[float]:
    return [start + i * step for i in range(round((end - start) / step) + 1)]


def loop_over(store: Store, current: MonitorConfig) -> AlertingLoop:
    return AlertingLoop(None, AlertBook(store), None,
                        target_down=TargetDownMonitor(store, lambda: current))


def replay(loop: AlertingLoop, rounds: Iterable[float]
           ) -> tuple[dict[float, AlertState | None], dict[float, list[AmAlert]]]:
    """The target-down alert's state after each round, and what each round sent."""
    states: dict[float, AlertState | None] = {}
    sent: dict[float, list[AmAlert]] = {}
    for t in rounds:
        sent[t] = loop.evaluate(T0 + t)
        found = [a.state for a in loop.book.alerts() if a.name == TARGET_DOWN_ALERT]
        states[t] = found[0] if found else None
    return states, sent


def down_from_60_to_480(t: float) -> bool:
    return not 60 <= t < 480


def test_a_down_target_is_pending_then_fires_after_for_and_resolves_when_it_answers(
        store: Store) -> None:
    scrapes(store, "ref", grid(0, 600), down_from_60_to_480)
    states, sent = replay(loop_over(store, config()), grid(0, 600))
    assert states[45] is None
    assert {states[t] for t in grid(60, 345)} == {AlertState.PENDING}  # 5m not yet held
    assert {states[t] for t in grid(360, 465)} == {AlertState.FIRING}
    assert states[480] is AlertState.RESOLVED  # its first scrape that answers
    (fired,) = sent[360]
    assert fired.labels == {"alertname": TARGET_DOWN_ALERT, "target": "ref",
                            "severity": "ticket"}
    assert fired.annotations["summary"] == (
        f"Target ref is down since 2027-01-15T08:01:00Z: {ERROR}")
    assert fired.annotations["down_since"] == "2027-01-15T08:01:00Z"  # T0 + 60
    assert fired.annotations["last_error"] == ERROR
    assert fired.generator_url == "http://127.0.0.1:8080/api/v1/targets/ref"
    (resolved,) = sent[480]
    assert resolved.ends_at is not None and resolved.ends_at.timestamp() == T0 + 480


@pytest.mark.parametrize(("settings", "fires_at", "severity"), [
    ("{for_seconds: 0}", 60.0, "ticket"),
    ("{for_seconds: 120, severity: page}", 180.0, "page"),
    ("{enabled: false}", None, None),
], ids=["for 0 fires at the first round that sees it down",
        "a page after 2 minutes when so configured",
        "disabled, nothing fires"])
def test_the_settings_decide_when_and_how_it_fires(store: Store, settings: str,
                                                   fires_at: float | None,
                                                   severity: str | None) -> None:
    scrapes(store, "ref", grid(0, 600), down_from_60_to_480)
    loop = loop_over(store, config(settings))
    states, sent = replay(loop, grid(0, 600))
    firing = [t for t, state in states.items() if state is AlertState.FIRING]
    assert (firing[0] if firing else None) == fires_at
    if fires_at is not None:
        assert sent[fires_at][0].labels["severity"] == severity


def test_a_target_missing_from_the_config_or_never_scraped_does_not_alert(
        store: Store) -> None:
    scrapes(store, "removed", grid(0, 600), lambda t: False)  # down, but no longer configured
    loop = loop_over(store, config(targets=["ref"]))  # configured, never scraped
    states, _ = replay(loop, grid(0, 600))
    assert set(states.values()) == {None}
    assert loop.book.alerts() == []
    assert loop.target_down is not None and loop.target_down.tick(T0 + 600) == []


def test_a_scrape_that_answers_between_two_rounds_starts_the_wait_over(store: Store) -> None:
    # Scrapes every 5 s, rounds every 15 s: one good scrape at 100 s in an outage from 10 s.
    scrapes(store, "ref", grid(0, 900, 5), lambda t: t < 10 or t == 100, interval=5)
    states, _ = replay(loop_over(store, config()), grid(0, 900))
    assert states[15] is AlertState.PENDING and states[90] is AlertState.PENDING
    assert states[105] is None  # the pending alert is dropped: never sent
    assert states[120] is AlertState.PENDING
    firing = [t for t, state in states.items() if state is AlertState.FIRING]
    assert firing[0] == 420  # 5 minutes after the round that saw the new outage, not 315


def test_a_restarted_monitor_keeps_the_alert_and_its_outage_start(store: Store) -> None:
    scrapes(store, "ref", grid(0, 600), down_from_60_to_480)
    first = loop_over(store, config())
    replay(first, grid(0, 390))
    (before,) = first.book.alerts()
    restarted = loop_over(store, config())  # a new book and monitor on the same store
    states, _ = replay(restarted, grid(405, 480))
    (after,) = [a for a in restarted.book.alerts()]
    assert states[405] is AlertState.FIRING and states[480] is AlertState.RESOLVED
    assert after.fired_at == before.fired_at == T0 + 360  # Alertmanager sees one alert
    assert after.annotations["down_since"] == before.annotations["down_since"]


def test_its_alerts_are_kept_while_the_store_cannot_be_read(store: Store) -> None:
    scrapes(store, "ref", grid(0, 600), down_from_60_to_480)
    loop = loop_over(store, config())
    replay(loop, grid(0, 360))
    assert loop.target_down is not None

    def unreadable(now: float) -> list[object]:
        raise OSError("database is locked")
    loop.target_down.tick = unreadable  # type: ignore[assignment,method-assign]
    states, _ = replay(loop, grid(375, 480))
    assert set(states.values()) == {AlertState.FIRING}  # frozen, not resolved


# --- both paths on one outage ----------------------------------------------------------------

@pytest.mark.parametrize("for_seconds", [300.0, 0.0, 50.0],
                         ids=["the default 5 minutes", "at once",
                              "50 s, between two evaluations"])
def test_both_paths_fire_and_resolve_at_the_same_evaluation(store: Store, tmp_path: Path,
                                                            for_seconds: float) -> None:
    rule = TargetDownRule(TargetDownConfig(for_seconds=for_seconds))
    times = outage(rule)
    evaluations = grid(0, times.end, times.interval)
    # The monitor: its collector scraped the target at each evaluation.
    scrapes(store, "llm-0", evaluations, times.up, interval=times.interval)
    states, _ = replay(loop_over(store, config(f"{{for_seconds: {for_seconds}}}", ["llm-0"])),
                       evaluations)
    firing = [t for t, state in states.items() if state is AlertState.FIRING]
    assert (firing[0], firing[-1] + times.interval) == (times.fires_at, times.recovered)
    # Prometheus: the generated rule's promtool test asserts the same two edges.
    (tmp_path / "tests").mkdir()
    (tmp_path / RULES_FILE).write_text(generate_rules([], target_down=rule))
    test_file = tmp_path / TARGET_DOWN_TEST_FILE
    test_file.write_text(generate_target_down_tests(rule))
    run_promtool("test", "rules", str(test_file))


def test_the_rule_names_its_targets_and_leaves_the_others_alone(tmp_path: Path) -> None:
    rule = TargetDownRule(TargetDownConfig(runbook_url="https://runbooks.example/{target}"),
                          targets=("vllm", "sglang"))
    text = generate_rules([], target_down=rule)
    assert 'expr: up{job=~"sglang|vllm"} == 0' in text
    assert "runbook_url: https://runbooks.example/{{ $labels.job }}" in text
    (tmp_path / "tests").mkdir()
    (tmp_path / RULES_FILE).write_text(text)
    test_file = tmp_path / TARGET_DOWN_TEST_FILE
    test_file.write_text(generate_target_down_tests(rule))
    assert 'up{instance="10.0.0.7:8000",job="unwatched"}' in test_file.read_text()
    run_promtool("test", "rules", str(test_file))


def test_a_disabled_alert_has_no_rule() -> None:
    assert "InferwatchTargetDown" not in generate_rules(
        [], target_down=TargetDownRule(TargetDownConfig(enabled=False)))


def test_promtool_runs_the_checked_in_target_down_test() -> None:
    run_promtool("test", "rules", str(ROOT / "alerts" / TARGET_DOWN_TEST_FILE))


def test_rules_generate_takes_the_monitors_settings_from_its_config(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    specs, out, settings = tmp_path / "slos.yaml", tmp_path / "alerts", tmp_path / "iw.yaml"
    specs.write_text("slos:\n  - {name: chat, objective: 0.999, sli: {kind: availability}}\n")
    settings.write_text("alerting:\n  evaluation_interval_seconds: 10\n"
                        "  target_down: {for_seconds: 60, severity: page}\n")
    argv = ["rules", "generate", "--slos", str(specs), "--out", str(out),
            "--config", str(settings), "--target-down-targets", "vllm"]
    assert cli.main(argv) == 0
    [group] = [g for g in yaml.safe_load((out / RULES_FILE).read_text())["groups"]
               if g["name"] == "inferwatch-target-down"]
    assert group["interval"] == "10s"
    assert group["rules"][0]["expr"] == 'up{job=~"vllm"} == 0'
    assert (group["rules"][0]["for"], group["rules"][0]["labels"]["severity"]) == ("1m", "page")
    run_promtool("test", "rules", str(out / TARGET_DOWN_TEST_FILE))

    settings.write_text("alerting: {target_down: {severity: pager}}\n")
    assert cli.main(argv) == 2
    assert "alerting.target_down.severity" in capsys.readouterr().err
