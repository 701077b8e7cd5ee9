"""Reading generated dashboards as Grafana would: their panels and targets, and the PromQL of a
target once the template variables are substituted."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
DASHBOARDS_DIR = ROOT / "dashboards"
SLOS_DIR = ROOT / "alerts" / "slos"
# Grafana's own variables, which no dashboard defines.
BUILTINS = ("__rate_interval", "__interval", "__range")
_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
# `name{matchers}`: a series selector (metric names may hold colons: recorded series).
SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}")
_LABEL_VALUES = re.compile(r"^label_values\((.*), *(\w+)\)$")


@dataclass(frozen=True)
class PanelTarget:
    dashboard: str
    panel: dict[str, Any]
    target: dict[str, Any]

    @property
    def name(self) -> str:
        return f"{self.dashboard} / {self.panel['title']} / {self.target['refId']}"

    @property
    def expr(self) -> str:
        return str(self.target["expr"])


def load_dashboards(directory: Path = DASHBOARDS_DIR) -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))}


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel that is not a row header."""
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def targets(dashboards: Mapping[str, dict[str, Any]]) -> Iterator[PanelTarget]:
    for name, dashboard in dashboards.items():
        for panel in panels(dashboard):
            for target in panel["targets"]:
                yield PanelTarget(name, panel, target)


def variables(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in dashboard["templating"]["list"]}


def used_variables(expr: str) -> set[str]:
    return {m.group(1) or m.group(2) for m in _VARIABLE.finditer(expr)}


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """``expr`` with each ``$name`` / ``${name}`` replaced; an unknown name is an error."""
    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in values:
            raise KeyError(f"no value for ${name} in {expr}")
        return values[name]
    return _VARIABLE.sub(replace, expr)


def label_values_query(definition: str) -> tuple[str, str]:
    """``label_values(SELECTOR, LABEL)`` as the instant query that lists the same values:
    ``count by (LABEL) (SELECTOR)``, and the label."""
    match = _LABEL_VALUES.match(definition)
    if match is None:
        raise ValueError(f"not a label_values() query: {definition}")
    return f"count by ({match[2]}) ({match[1]})", match[2]


def matchers(text: str) -> set[str]:
    """The matchers of a selector's braces, as written (``job=~"$job"``)."""
    return {m.strip() for m in re.findall(r'\w+\s*(?:=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"', text)}
