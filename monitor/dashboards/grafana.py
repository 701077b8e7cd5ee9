"""Grafana dashboard JSON (schemaVersion 39): panels, targets, thresholds, grid layout.

Only plain data goes in: every panel and target gets its datasource from the ``datasource``
variable, ids are given in order and the layout follows the rows, so the same input gives
the same JSON to the byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from monitor.dashboards.promql import Query

SCHEMA_VERSION: Final = 39
GRID_WIDTH: Final = 24
DATASOURCE: Final[dict[str, str]] = {"type": "prometheus", "uid": "${datasource}"}
Steps = tuple[tuple[str, float | None], ...]
TargetFormat = Literal["time_series", "heatmap", "table"]


@dataclass(frozen=True, slots=True)
class Target:
    query: Query
    instant: bool = False
    format: TargetFormat = "time_series"


@dataclass(frozen=True, slots=True)
class Panel:
    """A panel to lay out: what panels.yaml says, with its queries rendered."""

    title: str
    type: str
    targets: tuple[Target, ...]
    description: str = ""
    unit: str = "short"
    width: int = 12
    height: int = 8
    min: float | None = None
    max: float | None = None
    decimals: int | None = None
    stack: bool = False
    steps: Steps = ()
    threshold_lines: bool = False  # draw the steps as lines (timeseries)
    mappings: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Row:
    title: str
    panels: tuple[Panel, ...] = field(default_factory=tuple)


def _steps(steps: Steps) -> list[dict[str, Any]]:
    return [{"color": colour, "value": value} for colour, value in (steps or (("green", None),))]


def _target(target: Target, ref_id: str) -> dict[str, Any]:
    return {
        "datasource": DATASOURCE,
        "editorMode": "code",
        "expr": target.query.expr,
        "format": target.format,
        "instant": target.instant,
        "legendFormat": target.query.legend or "__auto",
        "range": not target.instant,
        "refId": ref_id,
    }


def ref_id(index: int) -> str:
    """A, B, ..., Z, AA, AB, ... as Grafana names targets."""
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = chr(ord("A") + rest) + name
    return name


def _field_config(panel: Panel) -> dict[str, Any]:
    defaults: dict[str, Any] = {
        "color": {"mode": "palette-classic" if panel.type == "timeseries" else "thresholds"},
        "mappings": list(panel.mappings),
        "thresholds": {"mode": "absolute", "steps": _steps(panel.steps)},
        "unit": panel.unit,
    }
    for key in ("min", "max", "decimals"):
        if getattr(panel, key) is not None:
            defaults[key] = getattr(panel, key)
    if panel.type == "timeseries":
        defaults["custom"] = {
            "drawStyle": "line", "fillOpacity": 10, "lineWidth": 1, "showPoints": "never",
            "spanNulls": False, "stacking": {"group": "A",
                                             "mode": "normal" if panel.stack else "none"},
            "thresholdsStyle": {"mode": "line" if panel.threshold_lines else "off"},
        }
    elif panel.type == "state-timeline":
        defaults["custom"] = {"fillOpacity": 80, "lineWidth": 0}
    return {"defaults": defaults, "overrides": []}


_REDUCE: Final = {"calcs": ["lastNotNull"], "fields": "", "values": False}


def _options(panel: Panel) -> dict[str, Any]:
    legend = {"calcs": [], "displayMode": "list", "placement": "bottom", "showLegend": True}
    if panel.type == "timeseries":
        return {"legend": legend, "tooltip": {"mode": "multi", "sort": "desc"}}
    if panel.type == "stat":
        return {"colorMode": "value", "graphMode": "area", "justifyMode": "auto",
                "orientation": "auto", "reduceOptions": _REDUCE, "textMode": "auto"}
    if panel.type == "gauge":
        return {"orientation": "auto", "reduceOptions": _REDUCE, "showThresholdLabels": False,
                "showThresholdMarkers": True}
    if panel.type == "bargauge":
        return {"displayMode": "gradient", "orientation": "horizontal",
                "reduceOptions": _REDUCE, "showUnfilled": True}
    if panel.type == "heatmap":
        return {"calculate": False, "cellGap": 1, "legend": {"show": True},
                "color": {"mode": "scheme", "scheme": "Oranges", "scale": "exponential",
                          "exponent": 0.5, "steps": 64, "reverse": False},
                "rowsFrame": {"layout": "auto"}, "tooltip": {"show": True, "yHistogram": True},
                "yAxis": {"axisPlacement": "left", "unit": panel.unit}}
    if panel.type == "state-timeline":
        return {"alignValue": "left", "legend": legend, "mergeValues": True,
                "rowHeight": 0.9, "showValue": "auto", "tooltip": {"mode": "single"}}
    return {"cellHeight": "sm", "showHeader": True}  # table


def _table_transformations(panel: Panel) -> list[dict[str, Any]]:
    if panel.type != "table":
        return []
    hidden = {"Time": True, "Value": True, "__name__": True}
    return [{"id": "organize", "options": {"excludeByName": hidden}}]


def panel_json(panel: Panel, panel_id: int, grid: dict[str, int]) -> dict[str, Any]:
    return {
        "datasource": DATASOURCE,
        "description": panel.description,
        "fieldConfig": _field_config(panel),
        "gridPos": grid,
        "id": panel_id,
        "options": _options(panel),
        "targets": [_target(t, ref_id(i)) for i, t in enumerate(panel.targets)],
        "title": panel.title,
        "transformations": _table_transformations(panel),
        "type": panel.type,
    }


def layout(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Row headers and their panels, left to right, wrapping at the grid's width."""
    panels: list[dict[str, Any]] = []
    y = 0
    for row in rows:
        panels.append({"collapsed": False, "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y},
                       "id": len(panels) + 1, "panels": [], "title": row.title, "type": "row"})
        y += 1
        x, line_height = 0, 0
        for panel in row.panels:
            if x + panel.width > GRID_WIDTH:
                x, y, line_height = 0, y + line_height, 0
            grid = {"h": panel.height, "w": panel.width, "x": x, "y": y}
            panels.append(panel_json(panel, len(panels) + 1, grid))
            x += panel.width
            line_height = max(line_height, panel.height)
        y += line_height
    return panels


def dashboard_json(*, uid: str, title: str, description: str, variables: list[dict[str, Any]],
                   rows: Sequence[Row], tags: Sequence[str]) -> dict[str, Any]:
    return {
        "annotations": {"list": [{
            "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"},
            "enable": True, "hide": True, "iconColor": "rgba(0, 211, 255, 1)",
            "name": "Annotations & Alerts", "type": "dashboard"}]},
        "description": description,
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [{"asDropdown": False, "icon": "external link", "includeVars": False,
                   "keepTime": True, "tags": [tags[0]], "targetBlank": False,
                   "title": "inferwatch dashboards", "type": "dashboards"}],
        "panels": layout(rows),
        "refresh": "30s",
        "schemaVersion": SCHEMA_VERSION,
        "tags": list(tags),
        "templating": {"list": variables},
        "time": {"from": "now-3h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": title,
        "uid": uid,
        "version": 1,
    }
