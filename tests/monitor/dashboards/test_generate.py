"""The generated dashboards: current with their inputs, well formed for Grafana, every query on
the variables, the SLO specs' thresholds drawn, and no metric name written by hand."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporters import schema
from monitor.dashboards import cli
from monitor.dashboards.generate import generate_dashboards
from monitor.dashboards.spec import PanelFileError, load_panels
from monitor.headroom.metrics import HEADROOM_METRIC
from monitor.slo.loaders import load_slos
from tests.integration import unavailable

from .dashboard_queries import (
    BUILTINS,
    DASHBOARDS_DIR,
    ROOT,
    SELECTOR,
    SLOS_DIR,
    load_dashboards,
    matchers,
    panels,
    substitute,
    targets,
    used_variables,
    variables,
)

INFERENCE, SLO = "inferwatch-inference.json", "inferwatch-slo.json"
SOURCES = ROOT / "monitor" / "dashboards"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def run_cli(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return cli.run(parser.parse_args(argv))


@pytest.fixture(scope="module")
def dashboards() -> dict[str, dict[str, Any]]:
    return load_dashboards()


def by_title(dashboard: dict[str, Any], title: str) -> dict[str, Any]:
    return next(p for p in panels(dashboard) if p["title"] == title)


def steps(panel: dict[str, Any]) -> list[tuple[str, float | None]]:
    return [(s["color"], s["value"])
            for s in panel["fieldConfig"]["defaults"]["thresholds"]["steps"]]


# --- current and deterministic --------------------------------------------------------------

def test_checked_in_dashboards_are_current(capsys: pytest.CaptureFixture[str]) -> None:
    status = run_cli(["generate", "--check", "--slos", str(SLOS_DIR),
                      "--out", str(DASHBOARDS_DIR)])
    assert status == 0, capsys.readouterr().out[-4000:]
    fresh = generate_dashboards(load_panels(), load_slos(SLOS_DIR))
    assert sorted(fresh) == [INFERENCE, SLO]
    for name, text in fresh.items():
        assert (DASHBOARDS_DIR / name).read_text() == text


def test_generation_does_not_depend_on_the_order_of_the_slos() -> None:
    slos = load_slos(SLOS_DIR)
    assert generate_dashboards(load_panels(), slos) == \
        generate_dashboards(load_panels(), list(reversed(slos)))


def test_check_reports_a_stale_file_and_generate_rewrites_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dashboards"
    assert run_cli(["generate", "--slos", str(SLOS_DIR), "--out", str(out)]) == 0
    path = out / INFERENCE
    path.write_text(path.read_text().replace("Throughput", "Thruput"))
    capsys.readouterr()
    assert run_cli(["generate", "--check", "--slos", str(SLOS_DIR), "--out", str(out)]) == 1
    captured = capsys.readouterr()
    assert '-      "title": "Thruput"' in captured.out and "out of date" in captured.err
    assert run_cli(["generate", "--slos", str(SLOS_DIR), "--out", str(out)]) == 0
    assert path.read_text() == (DASHBOARDS_DIR / INFERENCE).read_text()


# --- well formed ----------------------------------------------------------------------------

def test_every_panel_and_target_reads_the_datasource_variable(
        dashboards: dict[str, dict[str, Any]]) -> None:
    for dashboard in dashboards.values():
        assert dashboard["schemaVersion"] == 39
        for panel in panels(dashboard):
            assert panel["datasource"] == DATASOURCE, panel["title"]
            assert panel["targets"], panel["title"]
            assert all(t["datasource"] == DATASOURCE for t in panel["targets"])


def test_ids_are_unique_and_panels_do_not_overlap(dashboards: dict[str, dict[str, Any]]) -> None:
    for name, dashboard in dashboards.items():
        ids = [p["id"] for p in dashboard["panels"]]
        assert len(ids) == len(set(ids)), name
        cells: set[tuple[int, int]] = set()
        for panel in dashboard["panels"]:
            grid = panel["gridPos"]
            assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24, panel["title"]
            mine = {(x, y) for x in range(grid["x"], grid["x"] + grid["w"])
                    for y in range(grid["y"], grid["y"] + grid["h"])}
            assert not mine & cells, f"{name}: {panel['title']} overlaps another panel"
            cells |= mine
            ref_ids = [t["refId"] for t in panel.get("targets", [])]
            assert len(ref_ids) == len(set(ref_ids))


def test_the_required_panels_exist(dashboards: dict[str, dict[str, Any]]) -> None:
    inference = {p["title"] for p in panels(dashboards[INFERENCE])}
    assert inference >= {
        "Throughput (output tokens/s)", "Prefill vs decode (tokens/s)",
        "Requests by finish reason (req/s)", "Batch size distribution",
        "Batch size (quantiles and mean)", "Batch and KV-cache utilization",
        "GPU memory and KV cache", "KV-cache share of GPU memory", "GPU compute utilization",
        "GPU memory-bandwidth utilization", "Time to first token", "Inter-token latency",
        "End-to-end latency", "Queue depth (requests waiting)", "Queue wait time",
        "Errors by type (req/s)", "Error ratio", "Replicas", "Scaling events",
        "Cost per million output tokens", "Tokens/s per replica"}
    slo = {p["title"] for p in panels(dashboards[SLO])}
    assert slo >= {"Error budget remaining", "Time to budget exhaustion", "SLO alert state",
                   "Firing and pending alerts", "Burn rate 1h/5m: page above 14.4x",
                   "Burn rate 6h/30m: page above 6x", "Burn rate 1d/2h: ticket above 3x",
                   "Burn rate 3d/6h: ticket above 1x"}
    types = {p["type"] for d in dashboards.values() for p in panels(d)}
    assert types == {"timeseries", "stat", "gauge", "bargauge", "heatmap", "table",
                     "state-timeline"}


# --- variables ------------------------------------------------------------------------------

def test_variables_as_grafana_expects_them(dashboards: dict[str, dict[str, Any]]) -> None:
    inference = variables(dashboards[INFERENCE])
    assert list(inference) == ["datasource", "job", "model", "instance", "gpu_hour_price",
                               "gpus_per_replica"]
    assert inference["datasource"]["type"] == "datasource"
    assert inference["datasource"]["query"] == "prometheus"
    for name in ("job", "model", "instance"):
        var = inference[name]
        assert (var["type"], var["multi"], var["includeAll"], var["allValue"]) == \
            ("query", True, True, ".*")
        assert var["definition"].startswith("label_values(")
    assert inference["gpu_hour_price"]["query"] == "2.5"
    assert inference["gpus_per_replica"]["query"] == "1"
    assert list(variables(dashboards[SLO])) == ["datasource", "slo"]


def test_every_variable_used_is_defined_and_every_one_defined_is_used(
        dashboards: dict[str, dict[str, Any]]) -> None:
    for name, dashboard in dashboards.items():
        defined = set(variables(dashboard))
        exprs = [t["expr"] for p in panels(dashboard) for t in p["targets"]]
        exprs += [v.get("definition", "") for v in variables(dashboard).values()]
        used = set().union(*(used_variables(e) for e in exprs))
        assert used - set(BUILTINS) <= defined, name
        assert defined - {"datasource"} <= used, name


# --- queries --------------------------------------------------------------------------------

def _spec_of(series: str) -> schema.MetricSpec | None:
    for suffix in ("_bucket", "_sum", "_count", ""):
        name = series.removesuffix(suffix) if suffix else series
        for spec in schema.SCHEMA:
            if spec.exposed_name == name and (not suffix or spec.buckets):
                return spec
    return None


def test_engine_and_gpu_queries_filter_on_the_variables_their_labels_allow(
        dashboards: dict[str, dict[str, Any]]) -> None:
    seen = set()
    for target in targets({INFERENCE: dashboards[INFERENCE]}):
        if HEADROOM_METRIC in target.expr:  # the monitor's own series, by its target names
            continue
        selectors = SELECTOR.findall(target.expr)
        assert selectors, target.name
        for series, inside in selectors:
            spec = _spec_of(series)
            assert spec is not None, f"{target.name}: {series} is not a schema metric"
            expected = {'job=~"$job"', 'instance=~"$instance"'}
            if schema.MODEL in spec.labels:
                expected.add('model=~"$model"')
            found = matchers(inside)
            assert expected <= found, target.name
            assert ('model=~"$model"' in found) == (schema.MODEL in spec.labels)
            seen.add(spec.name)
        for spec in schema.SCHEMA:  # no schema metric without its selector
            bare = f"{spec.exposed_name} " in target.expr or target.expr.endswith(
                spec.exposed_name)
            assert not bare, f"{target.name}: {spec.exposed_name} without matchers"
    assert {schema.GPU_UTILIZATION_RATIO, schema.REQUEST_ERRORS, schema.BATCH_SIZE} <= seen


def test_slo_queries_filter_on_the_slo_variable(dashboards: dict[str, dict[str, Any]]) -> None:
    for target in targets({SLO: dashboards[SLO]}):
        selectors = SELECTOR.findall(target.expr)
        assert selectors, target.name
        for series, inside in selectors:
            assert 'slo=~"$slo"' in matchers(inside), f"{target.name}: {series}"


def test_no_metric_or_record_name_is_written_by_hand() -> None:
    """The panel list and the code name metrics by schema constant, records by the rules'
    functions: a renamed metric or rule changes the dashboards on regeneration."""
    names = [spec.name for spec in schema.SCHEMA] + ["inferwatch_slo:", "InferwatchSLO"]
    for path in [*SOURCES.glob("*.py"), *SOURCES.glob("*.yaml")]:
        text = path.read_text()
        written = [name for name in names if name in text]
        assert not written, f"{path.name} writes {written}"


# --- the SLO specs on the panels ------------------------------------------------------------

@pytest.mark.parametrize(("title", "bounds"), [
    ("Time to first token", [0.25]),       # chat-ttft: 250ms
    ("Inter-token latency", [0.05]),       # chat-itl: 50ms
    ("End-to-end latency", [5.0, 60.0]),   # chat-e2e-monthly: 5s, batch-e2e-latency: 60s
], ids=["ttft", "itl", "e2e"])
def test_latency_panels_draw_the_slo_bounds_as_lines(
        dashboards: dict[str, dict[str, Any]], title: str, bounds: list[float]) -> None:
    panel = by_title(dashboards[INFERENCE], title)
    assert steps(panel) == [("green", None), *(("red", b) for b in bounds)]
    assert panel["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"] == {"mode": "line"}
    assert [t["legendFormat"] for t in panel["targets"]] == [
        "{{model}} p50", "{{model}} p90", "{{model}} p95", "{{model}} p99"]


@pytest.mark.parametrize(("title", "factor", "long", "short"), [
    ("Burn rate 1h/5m: page above 14.4x", 14.4, "1h", "5m"),    # 2% of 30d in 1h
    ("Burn rate 6h/30m: page above 6x", 6.0, "6h", "30m"),      # 5% in 6h
    ("Burn rate 1d/2h: ticket above 3x", 3.0, "1d", "2h"),      # 10% in 1d
    ("Burn rate 3d/6h: ticket above 1x", 1.0, "3d", "6h"),      # 10% in 3d
    ("Burn rate 1h/5m: page above 13.44x", 13.44, "1h", "5m"),  # 28d: 0.02 * 672h / 1h
], ids=["page-1h", "page-6h", "ticket-1d", "ticket-3d", "page-1h-28d"])
def test_burn_rate_panels_carry_the_alert_factor(
        dashboards: dict[str, dict[str, Any]], title: str, factor: float, long: str,
        short: str) -> None:
    panel = by_title(dashboards[SLO], title)
    colour, value = steps(panel)[1]
    assert colour == "red" and value == pytest.approx(factor)
    assert [t["legendFormat"] for t in panel["targets"]] == [f"{{{{slo}}}} {long}",
                                                              f"{{{{slo}}}} {short}"]
    if factor == 14.4:  # chat-availability: 99.9%, its budget 0.001
        assert (f'inferwatch_slo:error_ratio:ratio_rate{long}{{slo="chat-availability",'
                f'slo=~"$slo"}} / 0.001') in panel["targets"][0]["expr"]


# --- bad input ------------------------------------------------------------------------------

def _panel_file(target: dict[str, Any]) -> dict[str, Any]:
    return {"dashboards": [{"uid": "x", "file": "x.json", "title": "X",
                            "variables": ["datasource", "job", "model", "instance"],
                            "rows": [{"title": "R", "panels": [{
                                "title": "P", "type": "timeseries", "targets": [target]}]}]}]}


@pytest.mark.parametrize(("target", "message"), [
    ({"form": "rate", "metric": "GENERATION_TOKENS_TYPO"}, "not a metric constant"),
    ({"form": "rate", "metric": "gen_ai_server_generation_tokens"}, "not a metric constant"),
    ({"form": "rate", "metric": "REQUESTS_RUNNING"}, "reads a counter"),
    ({"form": "quantiles", "metric": "TIME_TO_FIRST_TOKEN"}, "needs them"),
    ({"form": "gauge", "metric": "GPU_UTILIZATION_RATIO", "by": ["model"]}, "no label 'model'"),
    ({"form": "ratio", "metric": "REQUESTS_RUNNING"}, "`over` is required"),
    ({"form": "rate", "metric": "REQUESTS", "colour": "red"}, "Extra inputs"),
], ids=["typo", "prometheus-name", "wrong-type", "no-quantiles", "label", "no-over", "extra"])
def test_a_bad_panel_list_is_refused_naming_the_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], target: dict[str, Any],
        message: str) -> None:
    path = tmp_path / "panels.yaml"
    path.write_text(yaml.safe_dump(_panel_file(target)))
    with pytest.raises(PanelFileError, match=message) as raised:
        load_panels(path)
    assert str(path) in str(raised.value)
    assert "dashboards.0.rows.0.panels.0.targets.0" in str(raised.value)
    out = tmp_path / "out"
    assert run_cli(["generate", "--panels", str(path), "--slos", str(SLOS_DIR),
                    "--out", str(out)]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


# --- PromQL, by promtool --------------------------------------------------------------------

GRAFANA_VALUES = {"job": ".*", "model": ".*", "instance": ".*", "slo": ".*",
                  "gpu_hour_price": "2.5", "gpus_per_replica": "1", "__rate_interval": "1m",
                  "__interval": "15s", "__range": "1h"}


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        unavailable("promtool is not installed (apt-get install prometheus)")
    return path


@pytest.mark.integration
def test_promtool_parses_every_query(tmp_path: Path,
                                     dashboards: dict[str, dict[str, Any]]) -> None:
    """Every target, variables substituted as Grafana would, as a recording rule: promtool
    refuses one that does not parse, naming it."""
    rules = [{"record": f"panel:{i}", "expr": substitute(t.expr, GRAFANA_VALUES)}
             for i, t in enumerate(targets(dashboards))]
    path = tmp_path / "panels.rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": rules}]}))
    done = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules)} rules found" in done.stdout


def test_the_headroom_panel_reads_the_monitors_own_series(
        dashboards: dict[str, dict[str, Any]]) -> None:
    exprs = [t.expr for t in targets({INFERENCE: dashboards[INFERENCE]})
             if HEADROOM_METRIC in t.expr]
    assert exprs == [f"min by (target) ({HEADROOM_METRIC})",
                     f"min by (target, dimension) ({HEADROOM_METRIC})"]
