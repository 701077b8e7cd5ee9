"""Dashboard template variables: the Prometheus data source, job / model / instance chosen
from the series that exist, the SLOs, and the two numbers of the cost panel.

"All" is ``.*`` (``allValue``), not Grafana's default list of every value, so that a series
without the label (GPU metrics have no model) still matches ``model=~"$model"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from exporters import schema
from monitor.dashboards.grafana import DATASOURCE
from monitor.dashboards.promql import GPUS_VARIABLE, PRICE_VARIABLE, budget_records
from monitor.dashboards.spec import CostSpec
from monitor.slo.spec import Slo

# Every engine maps requests_running (the replica count uses it too); every GPU exporter
# maps memory used: between them, the targets the dashboards can show.
ENGINE_PRESENCE: Final = schema.get_spec(schema.REQUESTS_RUNNING).exposed_name
GPU_PRESENCE: Final = schema.get_spec(schema.GPU_MEMORY_USED_BYTES).exposed_name


def _query_variable(name: str, label: str, definition: str) -> dict[str, Any]:
    return {
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "datasource": DATASOURCE,
        "definition": definition,
        "hide": 0,
        "includeAll": True,
        "label": label,
        "multi": True,
        "name": name,
        "options": [],
        "query": definition,  # the classic string form: every Grafana version reads it
        "refresh": 2,  # on time range change: replicas come and go
        "regex": "",
        "skipUrlSync": False,
        "sort": 1,
        "type": "query",
    }


def _number_variable(name: str, label: str, value: float, description: str) -> dict[str, Any]:
    text = f"{value:g}"
    return {
        "current": {"selected": False, "text": text, "value": text},
        "description": description,
        "hide": 0,
        "label": label,
        "name": name,
        "options": [{"selected": True, "text": text, "value": text}],
        "query": text,
        "skipUrlSync": False,
        "type": "textbox",
    }


def _datasource() -> dict[str, Any]:
    return {"current": {}, "hide": 0, "includeAll": False, "label": "Data source",
            "multi": False, "name": "datasource", "options": [], "query": "prometheus",
            "refresh": 1, "regex": "", "skipUrlSync": False, "type": "datasource"}


def label_values(selector: str, label: str) -> str:
    return f"label_values({selector}, {label})"


def variable(name: str, slos: Sequence[Slo], cost: CostSpec) -> dict[str, Any]:
    """The Grafana definition of one variable of panels.yaml."""
    both = f'{{__name__=~"{ENGINE_PRESENCE}|{GPU_PRESENCE}"'
    if name == "datasource":
        return _datasource()
    if name == "job":
        return _query_variable("job", "Job", label_values(both + "}", "job"))
    if name == "model":
        return _query_variable("model", "Model", label_values(
            f'{ENGINE_PRESENCE}{{job=~"$job"}}', schema.MODEL))
    if name == "instance":
        return _query_variable("instance", "Instance",
                               label_values(both + ',job=~"$job"}', "instance"))
    if name == "slo":
        records = "|".join(budget_records(slos))
        return _query_variable("slo", "SLO", label_values(f'{{__name__=~"{records}"}}', "slo"))
    if name == PRICE_VARIABLE:
        return _number_variable(name, "$ per GPU-hour", cost.gpu_hour_price,
                                "Price of one GPU-hour, for the cost panel")
    if name == GPUS_VARIABLE:
        return _number_variable(name, "GPUs per replica", cost.gpus_per_replica,
                                "GPUs behind one replica (tensor parallel size)")
    raise ValueError(f"unknown dashboard variable {name!r}")
