"""Burn-rate windows as data (burn_windows.yaml) and the factors computed from them.

Two ways to fit the windows to an SLO's period (the file's ``mode``):

- ``scaled`` (default, Pyrra's way): one base table (the workbook's 30-day one); its windows
  are multiplied by period / base period and rounded to whole minutes, the factors are kept.
  Every period then spends the same share of its budget before each alert fires, and the
  detection time of a 100% error burst scales with the period.
- ``fixed`` (Sloth's period files): a table per period, used as written for an SLO of exactly
  that period; the factors are computed from it (budget_consumed * period / long).

Guard rails, whichever the mode: a factor below 1 is refused (it would alert while the budget
is on course to last the period); no window is shorter than ``min_short_window``; a scaled row
whose long window is then under twice its short one is dropped; a period left with no alert
of a severity it asks for is an error ("too short to alert on").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from monitor.slo.durations import format_duration, parse_duration
from monitor.slo.spec import AlertTemplate, Slo

# Alert names shared by the monitor's evaluator and the generated Prometheus rules.
BURN_ALERT = "InferwatchSLOBurnRate"
NO_DATA_ALERT = "InferwatchSLONoData"

_MINUTE = 60.0
DEFAULT_WINDOWS = "monitor/slo/burn_windows.yaml"


class Severity(StrEnum):
    PAGE = "page"
    TICKET = "ticket"


class WindowMode(StrEnum):
    SCALED = "scaled"
    FIXED = "fixed"


def _seconds(value: object) -> float:
    if not isinstance(value, (str, int, float)):
        raise ValueError(f"{value!r} is not a duration")
    return parse_duration(value)


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
        return _seconds(value)

    @field_validator("for_seconds", mode="before")
    @classmethod
    def _for(cls, value: object) -> float:
        return 0.0 if value in (0, "0", "0s", "0m") else _seconds(value)

    @model_validator(mode="after")
    def _short_inside_long(self) -> _WindowRow:
        if not self.short < self.long:
            raise ValueError("the short window must be shorter than the long one")
        return self


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    period: float
    windows: tuple[_WindowRow, ...] = Field(min_length=1)

    @field_validator("period", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float:
        return _seconds(value)

    @model_validator(mode="after")
    def _factors_at_least_one(self) -> _Table:
        for i, row in enumerate(self.windows):
            factor = row.budget_consumed * self.period / row.long
            if factor < 1:
                raise ValueError(
                    f"windows.{i}: {row.budget_consumed:g} of a {format_duration(self.period)} "
                    f"budget in {format_duration(row.long)} is a burn-rate factor of "
                    f"{factor:.3g}, below 1: it would alert while the budget is on course to "
                    "last the period")
        return self


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    mode: WindowMode = WindowMode.SCALED
    min_short_window: float = 2 * _MINUTE
    tables: tuple[_Table, ...] = Field(min_length=1)

    @field_validator("min_short_window", mode="before")
    @classmethod
    def _duration(cls, value: object) -> float:
        return _seconds(value)

    @model_validator(mode="after")
    def _tables_fit_the_mode(self) -> _File:
        if self.mode is WindowMode.SCALED and len(self.tables) != 1:
            raise ValueError("mode scaled takes one base table (its windows scale with each "
                             "SLO's period); use mode fixed for a table per period")
        periods = [t.period for t in self.tables]
        if len(set(periods)) != len(periods):
            raise ValueError("two tables for the same period")
        return self


@dataclass(frozen=True, slots=True)
class BurnWindow:
    """One alert condition of one SLO: burn rate above ``factor`` over both windows."""

    severity: Severity
    long_seconds: float
    short_seconds: float
    budget_consumed: float
    factor: float
    for_seconds: float
    # An explicit condition's own alert settings (not part of what makes two windows equal).
    template: AlertTemplate = field(default_factory=AlertTemplate, compare=False)

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

    def reset_seconds(self, error_ratio: float, error_budget: float) -> float:
        """Time from the end of an incident at ``error_ratio`` that filled the short window
        until the short window burns at or under the factor: when the alert resolves."""
        if error_ratio <= self.factor * error_budget:
            return 0.0
        return self.short_seconds * (1.0 - self.factor * error_budget / error_ratio)


@dataclass(frozen=True, slots=True)
class PlannedWindow:
    """A row of the windows table fitted to one period: kept, or dropped and why."""

    window: BurnWindow
    dropped: str | None = None


def window_plan(period_seconds: float, path: str | Path | None = None, *,
                unit_seconds: float = _MINUTE) -> list[PlannedWindow]:
    """Every row of the windows file fitted to a period (see the module's docstring). Scaled
    windows are whole multiples of ``unit_seconds`` (a minute, or a timeslice SLO's slice)."""
    file, source = _load(str(path or ""))
    if file.mode is WindowMode.FIXED:
        return _fixed(file, source, period_seconds)
    return _scaled(file, period_seconds, unit_seconds)


def burn_windows(slo: Slo, path: str | Path | None = None) -> tuple[BurnWindow, ...]:
    """The alert conditions of ``slo``: its explicit windows if it has them, else its windows
    file (or the default) fitted to its period. Raises ValueError when the period is too short
    to alert with a severity the SLO asks for."""
    period = slo.window.nominal_seconds
    wanted = {Severity.PAGE} if slo.alerting.page else set()
    wanted |= {Severity.TICKET} if slo.alerting.ticket else set()
    if slo.alerting.windows:
        return tuple(
            BurnWindow(Severity(w.severity), w.long_seconds, w.short_seconds,
                       w.factor * w.long_seconds / period, w.factor, w.for_seconds, w.alert)
            for w in slo.alerting.windows if Severity(w.severity) in wanted)
    plan = window_plan(period, path or slo.alerting.windows_file,
                       unit_seconds=slo.timeslice_seconds or _MINUTE)
    kept = tuple(p.window for p in plan if p.dropped is None and p.window.severity in wanted)
    for severity in sorted(wanted - {w.severity for w in kept}):
        reasons = "; ".join(f"{p.window.name}: {p.dropped}" for p in plan
                            if p.window.severity is severity and p.dropped)
        if reasons:  # (a file without rows of a severity simply does not alert with it)
            raise ValueError(
                f"SLO {slo.name}: a {format_duration(period)} period is too short to "
                f"{severity.value} on ({reasons}); set alerting.{severity.value}: false, give "
                "explicit alerting.windows, or use a longer period")
    return kept


_OURS = frozenset({"slo", "window", "alertname"})  # what identifies an alert: never the author's


@dataclass(frozen=True, slots=True)
class AuthoredAlert:
    """A burn-rate alert as the spec's author set it: its name, and the labels and
    annotations added to ours."""

    name: str
    labels: dict[str, str]
    annotations: dict[str, str]


def burn_alert(slo: Slo, window: BurnWindow) -> AuthoredAlert:
    """The name, the author's extra labels and annotations of one burn-rate alert: the
    SLO's alert settings, then its page or ticket settings, then the condition's own."""
    a = slo.alerting
    by_severity = a.page_alert if window.severity is Severity.PAGE else a.ticket_alert
    layers = (a.alert, by_severity, window.template)
    labels = {k: v for t in layers for k, v in t.labels.items() if k not in _OURS}
    annotations = {k: v for t in layers for k, v in t.annotations.items()}
    name = next((t.name for t in reversed(layers) if t.name), BURN_ALERT)
    return AuthoredAlert(name, labels, annotations)


def alert_labels(slo: Slo, severity: str, window: str,
                 author: dict[str, str] | None = None) -> dict[str, str]:
    """An alert's labels (without alertname): the SLO's, ours, then the spec author's (their
    severity wins; ``slo`` and ``window`` stay ours)."""
    labels = {**slo.labels, "service": slo.service, "severity": severity, **(author or {}),
              "slo": slo.name, "window": window}
    return dict(sorted(labels.items()))


def no_data_labels(slo: Slo) -> dict[str, str]:
    """The author's labels for all the SLO's alerts (routing: team, channel), less their
    severity: no data is our own ticket."""
    return {k: v for k, v in slo.alerting.alert.labels.items()
            if k not in _OURS and k != "severity"}


def check_short_windows(slos: Sequence[Slo], interval_seconds: float, what: str) -> None:
    """Refuse a window shorter than twice ``interval_seconds`` (a scrape or evaluation
    interval): its rate would rest on fewer than two samples."""
    for slo in slos:
        for w in burn_windows(slo):
            if w.short_seconds < 2 * interval_seconds:
                raise ValueError(
                    f"SLO {slo.name}: the {w.name} {w.severity.value} window's short window "
                    f"{format_duration(w.short_seconds)} is under twice the {what} "
                    f"({format_duration(interval_seconds)}); shorten the interval or give "
                    "longer windows")


def _round(seconds: float, unit: float) -> float:
    return max(unit, round(seconds / unit) * unit)


def _scaled(file: _File, period: float, unit: float) -> list[PlannedWindow]:
    (table,) = file.tables
    scale = period / table.period
    floor = math.ceil(file.min_short_window / unit) * unit
    plan = []
    for row in table.windows:
        factor = row.budget_consumed * table.period / row.long
        long = _round(row.long * scale, unit)
        short = max(_round(row.short * scale, unit), floor)
        window = BurnWindow(Severity(row.severity), long, short, factor * long / period, factor,
                            row.for_seconds)
        dropped = None
        if long < 2 * short:
            dropped = (f"{format_duration(row.long)}/{format_duration(row.short)} scaled by "
                       f"{scale:.3g} leaves a long window under twice the "
                       f"{format_duration(floor)} minimum short window")
        plan.append(PlannedWindow(window, dropped))
    return plan


def _fixed(file: _File, source: str, period: float) -> list[PlannedWindow]:
    table = next((t for t in file.tables if abs(t.period - period) < 1.0), None)
    if table is None:
        periods = ", ".join(format_duration(t.period) for t in file.tables)
        raise ValueError(f"{source}: no window table for a {format_duration(period)} period "
                         f"(tables: {periods}); add one, or use mode: scaled")
    plan = []
    for row in table.windows:
        if row.short < file.min_short_window:
            raise ValueError(f"{source}: the {format_duration(row.long)}/"
                             f"{format_duration(row.short)} short window is under the "
                             f"{format_duration(file.min_short_window)} minimum")
        window = BurnWindow(Severity(row.severity), row.long, row.short, row.budget_consumed,
                            row.budget_consumed * period / row.long, row.for_seconds)
        plan.append(PlannedWindow(window))
    return plan


@cache
def _load(path: str) -> tuple[_File, str]:
    if path:
        source, text = path, Path(path).read_text()
    else:
        source = DEFAULT_WINDOWS
        text = resources.files("monitor.slo").joinpath("burn_windows.yaml").read_text()
    try:
        return _File.model_validate(yaml.safe_load(text)), source
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"{source}: invalid burn-window table: {problems}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{source}: not YAML: {exc}") from None
