"""Canary judge configuration: the packaged default loads with the metric names the sample
producer uses; a bad file's error names the file and the field path, or the YAML line."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.canary.config import CanaryConfigError, load_judge_config, parse_judge_config
from monitor.canary.judge import Direction, MetricSpec

# The names the code producing the samples hands the judge (the contract).
CONTRACT = {"ttft", "tpot", "itl", "e2e", "ttft_p99", "itl_p99", "tpot_p99", "e2e_p99",
            "output_tokens_per_second", "requests_per_second", "error_rate"}

VALID = """\
confidence: 0.9
thresholds: {pass: 90, marginal: 60}
groups: {latency: 70, errors: 30}
metrics:
  - name: ttft
    group: latency
  - name: error_rate
    group: errors
    allowed_absolute: 0.02
    critical: true
  - name: tokens
    direction: decrease
    allowed_decrease: 0.9
    group: throughput
    nan_strategy: replace
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "canary.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(CanaryConfigError) as info:
        load_judge_config(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    return message


def test_default_loads() -> None:
    config = load_judge_config(None)
    by_name = {m.name: m for m in config.metrics}
    assert set(by_name) == CONTRACT
    assert dict(config.group_weights) == {"latency": 60, "throughput": 20, "errors": 20}
    assert (config.confidence, config.pass_threshold, config.marginal_threshold) == \
        (0.95, 95, 75)
    assert {name for name, m in by_name.items() if m.critical} == {"ttft_p99", "error_rate"}
    assert by_name["error_rate"] == MetricSpec(
        "error_rate", Direction.INCREASE, allowed_absolute=0.01, critical=True,
        must_have_data=False, group="errors")
    assert by_name["output_tokens_per_second"].direction is Direction.DECREASE
    assert by_name["requests_per_second"].group == "throughput"
    latency = [m for m in config.metrics if m.group == "latency"]
    assert {m.name for m in latency} == {"ttft", "tpot", "itl", "e2e", "ttft_p99", "itl_p99",
                                         "tpot_p99", "e2e_p99"}
    assert all(m.direction is Direction.INCREASE and m.allowed_increase == 1.05
               and m.allowed_decrease == 0.95 for m in latency)


def test_a_file_loads(tmp_path: Path) -> None:
    config = load_judge_config(write(tmp_path, VALID))
    assert config.confidence == 0.9
    assert (config.pass_threshold, config.marginal_threshold) == (90, 60)
    assert config.metrics == (
        MetricSpec("ttft", group="latency"),
        MetricSpec("error_rate", allowed_absolute=0.02, critical=True, group="errors"),
        MetricSpec("tokens", Direction.DECREASE, allowed_decrease=0.9, group="throughput",
                   nan_strategy="replace"),
    )
    assert config.group_weights == {"latency": 70, "errors": 30}


def test_defaults_apply() -> None:
    config = parse_judge_config("metrics: [{name: x}]")
    assert config.metrics == (MetricSpec("x"),)
    assert (config.confidence, config.pass_threshold, config.marginal_threshold) == \
        (0.95, 95, 75)


@pytest.mark.parametrize("old, new, expected", [
    ("    allowed_decrease: 0.9\n", "    allowed_decrease: 0.9\n    allowed_increase: 0.99\n",
     "metrics[2].allowed_increase: must be >= 1"),
    ("allowed_decrease: 0.9", "allowed_decrease: 0", "metrics[2].allowed_decrease: must be > 0"),
    ("allowed_decrease: 0.9", "allowed_decrease: 1.1",
     "metrics[2].allowed_decrease: must be <= 1"),
    ("allowed_absolute: 0.02", "allowed_absolute: 0", "metrics[1].allowed_absolute: must be > 0"),
    ("confidence: 0.9", "confidence: 0.5", "confidence: must be > 0.5"),
    ("confidence: 0.9", "confidence: 1", "confidence: must be < 1"),
    ("confidence: 0.9", "confidence: '0.9'", "confidence: must be a number"),
    ("{pass: 90, marginal: 60}", "{pass: 90, marginal: 91}",
     "thresholds.marginal: must be <= thresholds.pass (90)"),
    ("{pass: 90, marginal: 60}", "{pass: 101, marginal: 60}", "thresholds.pass: must be <= 100"),
    ("{latency: 70, errors: 30}", "{latency: -5, errors: 30}",
     "groups.latency: must be >= 0"),
    ("{latency: 70, errors: 30}", "{latency: 80, errors: 30}",
     "groups: weights must sum to <= 100, not 110"),
    ("{latency: 70, errors: 30}", "{latency: 50, errors: 30, spare: 10}",
     "groups.spare: no metric is in group 'spare'"),
    ("name: tokens", "name: ttft", "metrics[2].name: duplicate metric name 'ttft'"),
    ("direction: decrease", "direction: down", "metrics[2].direction: must be 'increase'"),
    ("nan_strategy: replace", "nan_strategy: zero", "metrics[2].nan_strategy: must be"),
    ("critical: true", "critical: sometimes", "metrics[1].critical: must be true or false"),
    ("    group: latency\n", "    group: latency\n    colour: red\n",
     "metrics[0].colour: unknown field"),
    ("confidence: 0.9", "confidence: 0.9\nthreshold: 3", "threshold: unknown field"),
])
def test_errors_name_the_field(tmp_path: Path, old: str, new: str, expected: str) -> None:
    assert old in VALID
    message = error_of(tmp_path, VALID.replace(old, new, 1))
    assert expected in message


@pytest.mark.parametrize("text, expected", [
    ("", "must be a mapping"),
    ("- a\n- b\n", "must be a mapping"),
    ("confidence: 0.9\n", "metrics: required"),
    ("metrics: []\n", "metrics: must not be empty"),
    ("metrics: {ttft: 1}\n", "metrics: must be a list"),
    ("metrics: [{group: x}]\n", "metrics[0].name: required"),
])
def test_structural_errors(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in error_of(tmp_path, text)


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    broken = VALID.replace("  - name: error_rate\n", "  - name: error_rate\n   bad: [1, 2\n")
    line = broken.splitlines().index("   bad: [1, 2") + 1
    message = error_of(tmp_path, broken)
    assert "invalid YAML" in message
    assert f"line {line}, column" in message


def test_yaml_error_in_a_string_names_the_line() -> None:
    with pytest.raises(CanaryConfigError, match=r"^inline: line 2, column \d+: invalid YAML"):
        parse_judge_config("metrics:\n  - name: a: b\n", "inline")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(CanaryConfigError, match=f"^{path}: cannot read"):
        load_judge_config(path)


def test_error_is_a_value_error() -> None:
    assert issubclass(CanaryConfigError, ValueError)
    with pytest.raises(ValueError, match=r"^<string>: metrics\[0\]\.name: must not be empty"):
        parse_judge_config("metrics: [{name: ''}]")
