"""alerting.target_down in inferwatch.yaml: its defaults, and the errors a bad value gets."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.collect.config import ConfigError, load_config, parse_config

ROOT = Path(__file__).resolve().parents[3]


def test_the_default_is_a_ticket_after_five_minutes() -> None:
    settings = parse_config("", "inferwatch.yaml").alerting.target_down
    assert (settings.enabled, settings.for_seconds, settings.severity) == (True, 300.0, "ticket")
    assert settings.links("ref") == {}


def test_the_example_config_spells_out_the_defaults() -> None:
    settings = load_config(ROOT / "inferwatch.yaml").alerting.target_down
    assert (settings.for_seconds, settings.severity) == (300.0, "ticket")


def test_links_name_the_target() -> None:
    settings = parse_config(
        "alerting: {target_down: {dashboard_url: 'https://grafana.example/d/x?var-target="
        "{target}', runbook_url: 'https://runbooks.example/target-down'}}",
        "inferwatch.yaml").alerting.target_down
    assert settings.links("chat-0") == {
        "runbook_url": "https://runbooks.example/target-down",
        "dashboard_url": "https://grafana.example/d/x?var-target=chat-0"}


@pytest.mark.parametrize(("value", "message"), [
    ("{for_seconds: -60}", "for_seconds: Input should be greater than or equal to 0"),
    ("{for_seconds: .inf}", "for_seconds: Input should be a finite number"),
    ("{for_seconds: 0.0004}", "for_seconds: 0.0004 s: give whole milliseconds"),
    ("{severity: pager}", "severity: Input should be 'ticket' or 'page' (got 'pager')"),
    ("{for_secs: 60}", "for_secs: unknown key; did you mean 'for_seconds'?"),
    ("{runbook_url: wiki/target-down}", "runbook_url: 'wiki/target-down' is not an http(s)"),
], ids=["a negative for", "an infinite for", "a for finer than Prometheus'",
        "an unknown severity", "a misspelt key", "a runbook that is not a URL"])
def test_a_bad_value_is_refused_naming_its_field(value: str, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_config(f"alerting: {{target_down: {value}}}", "inferwatch.yaml")
    assert f"alerting.target_down.{message}" in str(refused.value)
