"""Burn-rate windows as data (burn_windows.yaml) and the factors computed from them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from monitor.slo.durations import format_duration, parse_duration
from monitor.slo.spec import Slo


# Alert names shared by the monitor's evaluator and the generated Prometheus rules.
BURN_ALERT = "InferwatchSLOBurnRate"
NO_DATA_ALERT = "InferwatchSLONoData"


class Severity(StrEnum):
    PAGE = "page"
    TICKET = "ticket"


class _WindowRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    severity: Literal["page", "ticket"]
    long: float
    short: float
    budget_consumed: float = Field(gt=0, le=1)
    # Prometheus `for:`: how long the condition must hold before the alert fires.
    for_seconds: float = Field(default=0.0, ge=0, alias="for")

    @field_validator("long", "short", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float:
        if not isinstance(value, (str, int, float)):
            raise ValueError(f"{value!r} is not a duration")
        return parse_duration(value)

    @field_validator("for_seconds", mode="before")
    @classmethod
    def _for(cls, value: object) -> float:
        if value in (0, "0", "0s", "0m"):
            return 0.0
        if not isinstance(value, (str, int, float)):
            raise ValueError(f"{value!r} is not a duration")
        return parse_duration(value)


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    period: float
    windows: tuple[_WindowRow, ...] = Field(min_length=1)

    @field_validator("period", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float:
        if not isinstance(value, (str, int, float)):
            raise ValueError(f"{value!r} is not a duration")
        return parse_duration(value)


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    tables: tuple[_Table, ...] = Field(min_length=1)


@dataclass(frozen=True, slots=True)
class BurnWindow:
    """One alert condition of one SLO: burn rate above ``factor`` over both windows."""

    severity: Severity
    long_seconds: float
    short_seconds: float
    budget_consumed: float
    factor: float
    for_seconds: float

    @property
    def name(self) -> str:
        """The ``window`` label: "1h/5m"."""
        return f"{format_duration(self.long_seconds)}/{format_duration(self.short_seconds)}"

    def detection_seconds(self, error_ratio: float, error_budget: float) -> float:
        """Time from a step change to ``error_ratio`` (from none) until both windows burn
        above the factor, at steady traffic: the workbook's detection time."""
        if error_ratio <= self.factor * error_budget:
            return math.inf
        needed = self.factor * error_budget / error_ratio
        return max(needed * self.long_seconds, needed * self.short_seconds) + self.for_seconds


def burn_windows(slo: Slo, path: str | Path | None = None) -> tuple[BurnWindow, ...]:
    """The alert conditions of ``slo``: its explicit windows if it has them, else its windows
    file's table for its period (or the one nearest), with factors computed from the SLO's
    own period."""
    period = slo.window.nominal_seconds
    wanted = {Severity.PAGE} if slo.alerting.page else set()
    wanted |= {Severity.TICKET} if slo.alerting.ticket else set()
    if slo.alerting.windows:
        return tuple(
            BurnWindow(Severity(w.severity), w.long_seconds, w.short_seconds,
                       w.factor * w.long_seconds / period, w.factor, w.for_seconds)
            for w in slo.alerting.windows if Severity(w.severity) in wanted)
    tables = _load(str(path or slo.alerting.windows_file or ""))
    table = min(tables, key=lambda t: abs(math.log(t.period / period)))
    return tuple(
        BurnWindow(Severity(row.severity), row.long, row.short, row.budget_consumed,
                   row.budget_consumed * period / row.long, row.for_seconds)
        for row in table.windows if Severity(row.severity) in wanted)


@cache
def _load(path: str) -> tuple[_Table, ...]:
    if path:
        source, text = path, Path(path).read_text()
    else:
        source = "monitor/slo/burn_windows.yaml"
        text = resources.files("monitor.slo").joinpath("burn_windows.yaml").read_text()
    try:
        return _File.model_validate(yaml.safe_load(text)).tables
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"{source}: invalid burn-window table: {problems}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{source}: not YAML: {exc}") from None
