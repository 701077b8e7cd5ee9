"""The canary judge's configuration from YAML (the packaged default.yaml or a file of one's own).

Errors name the file and the field path (``canary.yaml: metrics[2].allowed_increase: must be
>= 1``), or the line for a YAML syntax error.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from monitor.canary.judge import Direction, JudgeConfig, MetricSpec

DEFAULT_SOURCE = "monitor/canary/default.yaml"


class CanaryConfigError(ValueError):
    """An invalid canary judge configuration; the message names the file and the field."""


class _Model(BaseModel):
    # Strict: a quoted "1.05" or a boolean where a number is due is a mistake, not a number.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)


class _Thresholds(_Model):
    pass_: float = Field(95.0, alias="pass", ge=0, le=100)
    marginal: float = Field(75.0, ge=0, le=100)


class _Metric(_Model):
    name: str = Field(min_length=1)
    direction: Literal["increase", "decrease", "either"] = "increase"
    allowed_increase: float = Field(1.05, ge=1)
    allowed_decrease: float = Field(0.95, gt=0, le=1)
    allowed_absolute: float | None = Field(None, gt=0)
    critical: bool = False
    must_have_data: bool = False
    group: str = Field("default", min_length=1)
    nan_strategy: Literal["remove", "replace"] = "remove"


class _Dependence(_Model):
    method: Literal["cluster-bootstrap", "design-effect", "independent"] = "cluster-bootstrap"
    resamples: int = Field(1000, ge=100, le=100_000)
    block: int = Field(0, ge=0)
    seed: int = 0


class _File(_Model):
    confidence: float = Field(0.95, gt=0.5, lt=1)
    gate: Literal["interval", "estimate"] = "interval"
    dependence: _Dependence = _Dependence.model_validate({})
    adjust_lengths: bool = True
    thresholds: _Thresholds = _Thresholds.model_validate({})
    groups: dict[str, Annotated[float, Field(ge=0)]] = Field(default_factory=dict)
    metrics: list[_Metric] = Field(min_length=1)


def load_judge_config(path: str | Path | None = None) -> JudgeConfig:
    """The judge configuration in ``path``, or the packaged default.yaml when None."""
    if path is None:
        text = resources.files("monitor.canary").joinpath("default.yaml").read_text("utf-8")
        return parse_judge_config(text, DEFAULT_SOURCE)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CanaryConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_judge_config(text, str(path))


def parse_judge_config(text: str, source: str = "<string>") -> JudgeConfig:
    """The judge configuration in YAML ``text``; ``source`` names it in errors."""
    try:
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise CanaryConfigError(
            f"{source}: {where}invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise CanaryConfigError(f"{source}: invalid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise CanaryConfigError(
            f"{source}: must be a mapping with confidence, thresholds, groups and metrics")
    try:
        parsed = _File.model_validate(data)
    except ValidationError as exc:
        problems = [f"{_path(e['loc'])}: {_message(e)}" for e in exc.errors()]
        raise CanaryConfigError(f"{source}: {'; '.join(problems)}") from None
    problems = _cross_checks(parsed)
    if problems:
        raise CanaryConfigError(f"{source}: {'; '.join(problems)}")
    return JudgeConfig(
        metrics=tuple(
            MetricSpec(name=m.name, direction=Direction(m.direction),
                       allowed_increase=m.allowed_increase,
                       allowed_decrease=m.allowed_decrease,
                       allowed_absolute=m.allowed_absolute, critical=m.critical,
                       must_have_data=m.must_have_data, group=m.group,
                       nan_strategy=m.nan_strategy)
            for m in parsed.metrics),
        group_weights=dict(parsed.groups),
        confidence=parsed.confidence,
        gate=parsed.gate,
        method=parsed.dependence.method,
        resamples=parsed.dependence.resamples,
        block=parsed.dependence.block,
        seed=parsed.dependence.seed,
        adjust_lengths=parsed.adjust_lengths,
        pass_threshold=parsed.thresholds.pass_,
        marginal_threshold=parsed.thresholds.marginal,
    )


def _cross_checks(parsed: _File) -> list[str]:
    """What the field constraints cannot say alone."""
    problems = []
    if parsed.thresholds.marginal > parsed.thresholds.pass_:
        problems.append(f"thresholds.marginal: must be <= thresholds.pass "
                        f"({parsed.thresholds.pass_:g})")
    total = sum(parsed.groups.values())
    if total > 100:
        problems.append(f"groups: weights must sum to <= 100, not {total:g}")
    first: dict[str, int] = {}
    for i, metric in enumerate(parsed.metrics):
        if metric.name in first:
            problems.append(f"metrics[{i}].name: duplicate metric name {metric.name!r} "
                            f"(also metrics[{first[metric.name]}])")
        first.setdefault(metric.name, i)
    used = {m.group for m in parsed.metrics}
    problems.extend(f"groups.{group}: no metric is in group {group!r}"
                    for group in parsed.groups if group not in used)
    return problems


def _path(loc: tuple[int | str, ...]) -> str:
    """("metrics", 2, "allowed_increase") -> "metrics[2].allowed_increase"."""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


_MESSAGES = {
    "greater_than_equal": "must be >= {ge:g}",
    "greater_than": "must be > {gt:g}",
    "less_than_equal": "must be <= {le:g}",
    "less_than": "must be < {lt:g}",
    "extra_forbidden": "unknown field",
    "missing": "required",
    "too_short": "must not be empty",
    "string_too_short": "must not be empty",
    "float_type": "must be a number",
    "int_type": "must be an integer",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "list_type": "must be a list",
}


def _message(error: ErrorDetails) -> str:
    template = _MESSAGES.get(error["type"])
    if template is not None:
        try:
            return template.format(**error.get("ctx", {}))
        except (KeyError, ValueError, TypeError):
            pass
    return str(error["msg"]).replace("Input should be", "must be")
