"""The API's JSON bodies as pandas DataFrames: one typed column per field, times as UTC
datetimes (``datetime64[ns, UTC]``), None as NaN/NaT. Each function names its columns.

Column kinds: ``time`` (unix seconds -> UTC datetime), ``float`` (float64, NaN for null),
``int`` (nullable ``Int64``), ``bool`` (nullable
``boolean``), ``text`` (``str``: pandas 3's string dtype, NaN for null).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import pandas as pd

Kind = Literal["time", "float", "int", "bool", "text"]
Row = Mapping[str, Any]

SLO_COLUMNS: Final[dict[str, Kind]] = {
    "name": "text", "service": "text", "description": "text", "objective": "float",
    "period": "text", "state": "text", "sli": "float", "events": "float",
    "budget_remaining": "float", "time_to_exhaustion_seconds": "float",
    "budget_state": "text", "budget_at_period_end": "float", "period_end": "time",
    "sustained_burn_rate": "float", "num_alerts_firing": "int", "evaluated_at": "time",
    "error": "text"}
HISTORY_COLUMNS: Final[dict[str, Kind]] = {
    "time": "time", "good": "float", "total": "float", "sli": "float",
    "budget_remaining": "float"}
TARGET_COLUMNS: Final[dict[str, Kind]] = {
    "name": "text", "url": "text", "engine": "text", "scrape_interval_seconds": "float",
    "state": "text", "last_scrape_at": "time", "last_scrape_seconds": "float",
    "last_error": "text", "headroom_state": "text", "headroom_ratio": "float"}
ALERT_COLUMNS: Final[dict[str, Kind]] = {
    "fingerprint": "text", "alertname": "text", "state": "text", "active_at": "time",
    "fired_at": "time", "resolved_at": "time", "value": "float", "slo": "text",
    "severity": "text", "summary": "text"}
ALERT_EVENT_COLUMNS: Final[dict[str, Kind]] = {
    "id": "int", "at": "time", "fingerprint": "text", "alertname": "text", "state": "text",
    "previous_state": "text", "fired_at": "time", "value": "float", "slo": "text",
    "severity": "text", "window": "text", "summary": "text", "dashboard_url": "text"}
RUN_COLUMNS: Final[dict[str, Kind]] = {
    "id": "text", "kind": "text", "name": "text", "status": "text", "started_at": "time",
    "finished_at": "time", "error": "text",
    "max_rate_under_slo": "float", "saturation_rate": "float",   # sweeps
    "outcome": "text", "score": "float"}                         # canaries
SWEEP_COLUMNS: Final[dict[str, Kind]] = {
    "rate": "float", "saturated": "bool", "reason": "text", "backlog_slope": "float",
    "attainment": "float", "requests": "int", "completed": "int", "failed": "int",
    "duration_seconds": "float", "offered_rate": "float", "request_throughput": "float",
    "output_throughput": "float", "total_token_throughput": "float",
    "mean_prompt_tokens": "float", "mean_output_tokens": "float", "goodput": "float"}
LATENCIES: Final = ("ttft", "tpot", "itl", "e2e")  # + _mean_seconds, _p50_seconds, ...
CANARY_COLUMNS: Final[dict[str, Kind]] = {
    "name": "text", "group": "text", "verdict": "text", "critical": "bool",
    "n_baseline": "int", "n_canary": "int", "n_nan_baseline": "int", "n_nan_canary": "int",
    "median_baseline": "float", "median_canary": "float", "mean_baseline": "float",
    "mean_canary": "float", "shift": "float", "ci_low": "float", "ci_high": "float",
    "p_value": "float", "effect": "float", "effect_ci_low": "float",
    "effect_ci_high": "float", "reason": "text"}


def column(values: Sequence[Any], kind: Kind) -> pd.Series:
    if kind == "time":
        times = pd.to_datetime(pd.Series(values, dtype="float64"), unit="s", utc=True)
        return times.dt.as_unit("ns")
    if kind == "float":
        return pd.Series([float("nan") if v is None else v for v in values], dtype="float64")
    if kind == "int":
        return pd.Series(values, dtype="Int64")
    if kind == "bool":
        return pd.Series(values, dtype="boolean")
    return pd.Series(values, dtype="str")


def frame(rows: Sequence[Row], columns: Mapping[str, Kind]) -> pd.DataFrame:
    """A DataFrame of ``rows`` with exactly ``columns``, each of its kind; a key missing from a
    row is null (a float or text column) there."""
    return pd.DataFrame({name: column([row.get(name) for row in rows], kind)
                         for name, kind in columns.items()})


def slos(items: Sequence[Row]) -> pd.DataFrame:
    """One row per SLO (``SLO_COLUMNS``), then ``burn_rate_<window>`` per alert window (null
    for an SLO without that window)."""
    windows = list(dict.fromkeys(b["window"] for s in items for b in s["burn_rates"]))
    rows = [{**s, "num_alerts_firing": sum(a["state"] == "firing" for a in s["alerts"]),
             **{f"burn_rate_{b['window']}": b["burn_rate"] for b in s["burn_rates"]}}
            for s in items]
    return frame(rows, {**SLO_COLUMNS, **{f"burn_rate_{w}": "float" for w in windows}})


def slo_history(report: Mapping[str, Any]) -> pd.DataFrame:
    """The report's steps (``HISTORY_COLUMNS``; ``time`` is the step's end), then per alert
    window ``burn_rate_long_<window>`` and ``burn_rate_short_<window>``."""
    series = report["series"]
    rows: list[dict[str, Any]] = [
        {"time": end, "good": good, "total": total, "sli": sli, "budget_remaining": budget}
        for end, good, total, sli, budget in zip(series["end"], series["good"],
                                                 series["total"], series["sli"],
                                                 series["budget_remaining"])]
    columns: dict[str, Kind] = dict(HISTORY_COLUMNS)
    for burn in report["burn_rates"]:
        for side in ("long", "short"):
            name = f"burn_rate_{side}_{burn['window']}"
            columns[name] = "float"
            for row, value in zip(rows, burn[side]):
                row[name] = value
    return frame(rows, columns)


def targets(items: Sequence[Row]) -> pd.DataFrame:
    """One row per target (``TARGET_COLUMNS``), then ``label_<name>`` per label."""
    labels = list(dict.fromkeys(k for t in items for k in t["labels"]))
    rows = [{**t, **{f"label_{k}": v for k, v in t["labels"].items()},
             "headroom_state": (t.get("headroom") or {}).get("state"),
             "headroom_ratio": (t.get("headroom") or {}).get("headroom_ratio")} for t in items]
    return frame(rows, {**TARGET_COLUMNS, **{f"label_{k}": "text" for k in labels}})


def series(body: Mapping[str, Any]) -> pd.DataFrame:
    """``time`` and a float column named after the metric (NaN where the target did not
    answer); ``attrs`` holds target, metric, unit and step."""
    metric = body["metric"]
    points = body["points"]
    result = frame([{"time": t, metric: v} for t, v in points],
                   {"time": "time", metric: "float"})
    result.attrs.update({k: body[k] for k in ("target", "metric", "unit", "step")})
    return result


def alerts(items: Sequence[Row]) -> pd.DataFrame:
    """One row per alert (``ALERT_COLUMNS``: ``slo`` and ``severity`` are labels, ``summary``
    an annotation), then ``label_<name>`` for every other label."""
    named = {"slo", "severity", "alertname"}
    labels = list(dict.fromkeys(k for a in items for k in a["labels"] if k not in named))
    rows = [{**a, "slo": a["labels"].get("slo"), "severity": a["labels"].get("severity"),
             "summary": a["annotations"].get("summary"),
             **{f"label_{k}": v for k, v in a["labels"].items() if k not in named}}
            for a in items]
    return frame(rows, {**ALERT_COLUMNS, **{f"label_{k}": "text" for k in labels}})


def alert_history(items: Sequence[Row]) -> pd.DataFrame:
    """One row per change of an alert's state, newest first (``ALERT_EVENT_COLUMNS``:
    ``slo``, ``severity`` and ``window`` are labels, ``summary`` and ``dashboard_url``
    annotations), then ``label_<name>`` for every other label."""
    named = {"slo", "severity", "window", "alertname"}
    labels = list(dict.fromkeys(k for e in items for k in e["labels"] if k not in named))
    rows = [{**e, **{k: e["labels"].get(k) for k in ("slo", "severity", "window")},
             **{k: e["annotations"].get(k) for k in ("summary", "dashboard_url")},
             **{f"label_{k}": v for k, v in e["labels"].items() if k not in named}}
            for e in items]
    return frame(rows, {**ALERT_EVENT_COLUMNS, **{f"label_{k}": "text" for k in labels}})


def runs(items: Sequence[Row]) -> pd.DataFrame:
    """One row per run (``RUN_COLUMNS``): a sweep's headline (max rate under the SLO,
    saturation rate) or a canary's (outcome, score); null while running or when failed."""
    rows = []
    for run in items:
        result = run.get("result") or {}
        judgement = result.get("judgement") or {}
        rows.append({**run, "max_rate_under_slo": result.get("max_rate_under_slo"),
                     "saturation_rate": result.get("saturation_rate"),
                     "outcome": judgement.get("outcome"), "score": judgement.get("score")})
    return frame(rows, RUN_COLUMNS)


def sweep(result: Mapping[str, Any]) -> pd.DataFrame:
    """One row per rate stepped, ascending (``SWEEP_COLUMNS``), then per latency (ttft, tpot,
    itl, e2e) ``<latency>_mean_seconds`` and ``<latency>_<percentile>_seconds``; ``attrs``
    holds the headline (max_rate_under_slo, saturation_rate, knee_rate, slo)."""
    rows: list[dict[str, Any]] = []
    columns: dict[str, Kind] = dict(SWEEP_COLUMNS)
    for point in result["points"]:
        summary = point.get("summary") or {}
        row = {**summary, **point}
        for name, dist in (summary.get("latency") or {}).items():
            if dist is None:
                continue
            row[f"{name}_mean_seconds"] = dist["mean"]
            row.update({f"{name}_{q}_seconds": v for q, v in dist["percentiles"].items()})
        columns.update({k: "float" for k in row if k.endswith("_seconds") and k not in columns})
        rows.append(row)
    result_frame = frame(rows, columns)
    result_frame.attrs.update({k: result.get(k) for k in (
        "max_rate_under_slo", "saturation_rate", "knee_rate", "slo")})
    return result_frame


def canary(result: Mapping[str, Any]) -> pd.DataFrame:
    """One row per judged metric (``CANARY_COLUMNS``); ``attrs`` holds the outcome, score and
    critical failures."""
    judgement = result["judgement"]
    rows = [{**r, "effect_ci_low": r["effect_ci"][0], "effect_ci_high": r["effect_ci"][1]}
            for r in judgement["results"]]
    result_frame = frame(rows, CANARY_COLUMNS)
    result_frame.attrs.update({k: judgement[k] for k in ("outcome", "score",
                                                          "critical_failures")})
    return result_frame
