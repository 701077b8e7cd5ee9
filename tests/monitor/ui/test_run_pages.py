"""The canary and sweep pages show the numbers the JSON API gives for the same runs, formatted
as the UI formats them (monitor/ui/fmt.py); the sweep's charts mark the capacity, knee and
saturation at their rates; running and failed runs say so; unknown ids are the 404 page."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from markupsafe import escape

from monitor.canary.config import load_judge_config
from monitor.ui import fmt
from monitor.ui.run_views import unit_of
from tests.monitor.ui.runs_data import RunsApi, served_runs
from tests.monitor.ui.test_pages import row


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunsApi]:
    with served_runs(tmp_path_factory.mktemp("ui-runs")) as served:
        yield served


def html(runs: RunsApi, path: str, status: int = 200) -> str:
    response = httpx.get(runs.api.url + path, timeout=30)
    assert response.status_code == status, (path, response.status_code)
    assert response.headers["content-type"].startswith("text/html")
    return response.text


def api(runs: RunsApi, path: str) -> Any:
    response = httpx.get(runs.api.url + path, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def field(page: str, name: str) -> str:
    """The text of the first element with ``data-field="name"``."""
    found = re.search(rf'<(\w+)[^>]* data-field="{name}"[^>]*>(.*?)</\1>', page, re.S)
    assert found, f"no field {name!r}"
    return found.group(2)


def section(page: str, element_id: str) -> str:
    found = re.search(rf'<(\w+)[^>]* id="{element_id}"[^>]*>.*?</\1>', page, re.S)
    assert found, f"no element #{element_id}"
    return found.group(0)


def test_the_nav_links_to_both_lists(runs: RunsApi) -> None:
    page = html(runs, "/")
    assert '<a href="/ui/canaries">Canaries</a>' in page
    assert '<a href="/ui/sweeps">Sweeps</a>' in page


@pytest.mark.parametrize("kind", ["canaries", "sweeps"])
def test_each_list_links_every_run_to_its_page(runs: RunsApi, kind: str) -> None:
    page = html(runs, f"/ui/{kind}")
    items = api(runs, f"/api/v1/{kind}")["items"]
    assert len(items) == (4 if kind == "canaries" else 3)
    links = re.findall(rf'<a href="(/ui/{kind}/[^"]+)">', page)
    assert links == [f"/ui/{kind}/{item['id']}" for item in items]   # newest first, as the API
    for item, link in zip(items, links):
        shown = row(page, "data-run", item["id"])
        assert f'<span class="state {item["status"]}">{item["status"]}</span>' in shown
        assert fmt.when(item["started_at"]) in shown
        assert f"<title>{'Canary' if kind == 'canaries' else 'Sweep'} {item['name']} · " \
               "inferwatch</title>" in html(runs, link)


def test_the_canary_list_shows_mode_verdict_and_score(runs: RunsApi) -> None:
    page = html(runs, "/ui/canaries")
    for item in api(runs, "/api/v1/canaries")["items"]:
        shown = row(page, "data-run", item["id"])
        assert f"<td>{item['config'].get('mode', 'live')}</td>" in shown
        if item["result"] is None:
            assert 'data-field="verdict"' not in shown
            continue
        judgement = item["result"]["judgement"]
        assert field(shown, "verdict") == judgement["outcome"]
        assert field(shown, "score") == fmt.number(judgement["score"], 2)
    stored = row(page, "data-run", runs.stored_canary)
    assert "<td>ref-1 → ref-0</td>" in stored


def test_the_sweep_list_shows_the_capacity_knee_and_saturation(runs: RunsApi) -> None:
    shown = row(html(runs, "/ui/sweeps"), "data-run", runs.sweep)
    result = api(runs, f"/api/v1/sweeps/{runs.sweep}")["result"]
    for key in ("max_rate_under_slo", "knee_rate", "saturation_rate"):
        assert result[key] is not None
        assert field(shown, key) == fmt.number(result[key], 2)


def test_the_live_canary_page_shows_the_judgement_per_metric(runs: RunsApi) -> None:
    page = html(runs, f"/ui/canaries/{runs.live_canary}")
    run = api(runs, f"/api/v1/canaries/{runs.live_canary}")
    judgement = run["result"]["judgement"]
    assert judgement["outcome"] == "marginal"    # the slower prefill fails ttft alone
    summary = section(page, "summary")
    assert field(summary, "verdict") == judgement["outcome"]
    assert field(summary, "score") == fmt.number(judgement["score"], 2)
    assert field(summary, "mode") == "live"
    for group, score in judgement["group_scores"].items():
        assert f'<span data-group="{group}">{group} {fmt.number(score, 2)}</span>' in summary
    reasons = section(page, "reasons")
    failed = [r for r in judgement["results"] if r["verdict"] != "pass"]
    assert [r["name"] for r in failed] == ["ttft"]
    assert f"<li>ttft: {escape(failed[0]['reason'])}</li>" in reasons
    for result in judgement["results"]:
        shown = row(page, "data-metric", result["name"])
        text = unit_of(result["name"]).text
        assert field(shown, "verdict") == result["verdict"]
        for key in ("median_baseline", "median_canary", "mean_baseline", "mean_canary",
                    "shift"):
            assert field(shown, key) == text(result[key]), (result["name"], key)
        assert field(shown, "shift_ci") == f"[{text(result['ci_low'])}, " \
                                           f"{text(result['ci_high'])}]"
        assert field(shown, "p_value") == fmt.sig(result["p_value"])
        assert f"{result['n_baseline']} / {result['n_canary']}" in shown
    # Units as the metric is measured: seconds in ms, rates per second, ratios in percent.
    ttft = next(r for r in judgement["results"] if r["name"] == "ttft")
    assert field(row(page, "data-metric", "ttft"), "median_canary") == \
        fmt.millis(ttft["median_canary"])
    assert field(row(page, "data-metric", "ttft"), "effect") == f"{fmt.sig(ttft['effect'])}×"
    errors = next(r for r in judgement["results"] if r["name"] == "error_rate")
    assert field(row(page, "data-metric", "error_rate"), "effect") == \
        fmt.percent(errors["effect"], 2)   # judged absolutely: the shift, not a ratio
    assert field(row(page, "data-metric", "ttft"), "test") == \
        '<abbr title="Mann-Whitney U; ratio effect">U test, ratio</abbr>'
    assert field(row(page, "data-metric", "error_rate"), "test") == \
        '<abbr title="none: identical samples">identical</abbr>'   # all values 0 on both


def test_the_live_canary_page_plots_both_sides_of_each_metric(runs: RunsApi) -> None:
    page = html(runs, f"/ui/canaries/{runs.live_canary}")
    result = api(runs, f"/api/v1/canaries/{runs.live_canary}")["result"]
    plots = section(page, "metric-plots")
    for metric in result["judgement"]["results"]:
        figure = re.search(rf'<figure data-metric="{metric["name"]}">.*?</figure>', plots, re.S)
        assert figure, metric["name"]
        scale = unit_of(metric["name"]).scale
        for side in ("baseline", "canary"):
            value = metric[f"median_{side}"] * scale
            assert f'data-series="{side}" data-value="{value!r}"' in figure.group(0)
    distributions = section(page, "distributions")
    for metric in ("ttft", "tpot", "itl", "e2e"):
        p99 = result["canary"]["latency"][metric]["percentiles"]["p99"] * 1000
        assert f'data-series="canary" data-value="{p99!r}"' in distributions
    runs_table = section(page, "runs")
    assert fmt.number(result["baseline"]["request_throughput"], 2) in runs_table
    assert fmt.number(result["canary"]["output_throughput"], 1) in runs_table


@pytest.mark.parametrize("which", ["live_canary", "stored_canary"])
def test_each_metrics_effect_is_written_as_the_judge_measured_it(runs: RunsApi,
                                                                  which: str) -> None:
    """A ratio (×) unless the packaged judge configuration judges the metric absolutely."""
    run_id = getattr(runs, which)
    page = html(runs, f"/ui/canaries/{run_id}")
    absolute = {m.name for m in load_judge_config().metrics if m.allowed_absolute is not None}
    assert absolute == {"error_rate"}
    for result in api(runs, f"/api/v1/canaries/{run_id}")["result"]["judgement"]["results"]:
        shown = field(row(page, "data-metric", result["name"]), "effect")
        if result["verdict"] == "nodata":
            assert shown == fmt.DASH
        elif result["name"] in absolute:
            assert shown == unit_of(result["name"]).text(result["effect"])
        else:
            assert shown == f"{fmt.sig(result['effect'])}×", result["name"]


def test_the_stored_canary_page_names_the_targets_and_the_range(runs: RunsApi) -> None:
    page = html(runs, f"/ui/canaries/{runs.stored_canary}")
    run = api(runs, f"/api/v1/canaries/{runs.stored_canary}")
    result = run["result"]
    assert field(page, "mode") == "stored"
    assert f"ref-1 → ref-0, {fmt.when(result['start'])} to {fmt.when(result['end'])}" in page
    assert field(page, "score") == fmt.number(result["judgement"]["score"], 2)
    error_rate = row(page, "data-metric", "error_rate")
    measured = next(r for r in result["judgement"]["results"] if r["name"] == "error_rate")
    assert field(error_rate, "median_canary") == fmt.percent(measured["median_canary"], 2)
    assert 'id="distributions"' not in page   # no load runs: no latency percentiles
    judgement = result["judgement"]
    assert judgement["critical_failures"] == ["error_rate"]   # ref-0 fails 1 request in 10
    assert "<li>critical failure: error_rate</li>" in section(page, "reasons")
    empty = [r["name"] for r in judgement["results"] if r["verdict"] == "nodata"]
    assert empty and f"No data on either side to plot: {', '.join(empty)}." in page
    plotted = re.findall(r'<figure data-metric="([^"]+)">', section(page, "metric-plots"))
    assert plotted == [r["name"] for r in judgement["results"] if r["name"] not in empty]
    assert '<tr data-key="baseline_target"><th>baseline_target</th><td>ref-1</td></tr>' in page


def test_the_sweep_page_states_the_apis_figures(runs: RunsApi) -> None:
    page = html(runs, f"/ui/sweeps/{runs.sweep}")
    result = api(runs, f"/api/v1/sweeps/{runs.sweep}")["result"]
    summary = section(page, "summary")
    assert field(summary, "max_rate_under_slo") == \
        f"{fmt.number(result['max_rate_under_slo'], 2)} req/s"
    assert field(summary, "knee_rate").startswith(f"{fmt.number(result['knee_rate'], 2)} req/s")
    assert field(summary, "saturation_rate") == f"{fmt.number(result['saturation_rate'], 2)} req/s"
    low, high = result["bracket"]
    assert field(summary, "bracket").startswith(
        f"{fmt.number(low, 2)} to {fmt.number(high, 2)} req/s")
    assert field(summary, "binding").startswith(result["dimensions"]["binding"])
    assert escape(result["slo"]) in field(summary, "slo")
    table = section(page, "points")
    assert len(result["points"]) == table.count("<tr data-rate=") == 6
    for point in result["points"]:
        shown = row(table, "data-rate", repr(point["rate"]))
        s = point["summary"]
        assert field(shown, "rate") == fmt.number(point["rate"], 2)
        assert field(shown, "request_throughput") == fmt.number(s["request_throughput"], 2)
        assert field(shown, "goodput") == fmt.number(s["goodput"], 2)
        assert field(shown, "output_throughput") == fmt.number(s["output_throughput"], 1)
        assert field(shown, "attainment") == fmt.percent(point["attainment"], 2)
        for metric in ("ttft", "tpot", "e2e"):
            for q in ("p50", "p99"):
                assert field(shown, f"{metric}_{q}") == \
                    fmt.millis(s["latency"][metric]["percentiles"][q])
        assert ("saturated" in shown) == point["saturated"]
        if point["saturated"]:
            assert point["reason"] in shown


def _markers(chart: str) -> dict[str, tuple[float, float]]:
    """Each marker's kind -> (its value, its line's x) in a chart."""
    return {kind: (float(value), float(x)) for kind, value, x in re.findall(
        r'<g class="marker (\w+)" data-value="([^"]+)"><line x1="([\d.]+)"', chart)}


def test_the_sweep_charts_mark_capacity_knee_and_saturation_at_their_rates(
        runs: RunsApi) -> None:
    page = html(runs, f"/ui/sweeps/{runs.sweep}")
    result = api(runs, f"/api/v1/sweeps/{runs.sweep}")["result"]
    expected = {"capacity": result["max_rate_under_slo"], "knee": result["knee_rate"],
                "saturation": result["saturation_rate"]}
    charts = re.findall(r'<figure id="chart-([\w-]+)">(.*?)</figure>', page, re.S)
    assert [name for name, _ in charts] == ["attainment", "latency-ttft", "latency-tpot",
                                            "latency-e2e", "requests", "tokens"]
    for name, chart in charts:
        root = re.search(r'data-x-min="([^"]+)" data-x-max="([^"]+)" data-width="(\d+)"', chart)
        assert root, name
        x_min, x_max, width = (float(v) for v in root.groups())
        markers = _markers(chart)
        assert {k: v for k, (v, _) in markers.items()} == expected, name
        for value, x in markers.values():
            assert x == pytest.approx((value - x_min) / (x_max - x_min) * width, abs=0.05)
        for label, value in [("max under SLO", expected["capacity"]),
                             ("knee", expected["knee"])]:
            assert f"{label} {fmt.number(value, 2)} req/s" in chart


def test_the_sweep_charts_draw_the_slo_lines(runs: RunsApi) -> None:
    page = html(runs, f"/ui/sweeps/{runs.sweep}")
    result = api(runs, f"/api/v1/sweeps/{runs.sweep}")["result"]
    charts = dict(re.findall(r'<figure id="chart-([\w-]+)">(.*?)</figure>', page, re.S))
    target = result["attainment_target"]
    assert f'<g class="threshold target" data-value="{target * 100!r}">' in charts["attainment"]
    assert f"target {fmt.percent(target, 1)}" in charts["attainment"]
    for metric in ("ttft", "tpot"):
        limit = result["slo_seconds"][metric]
        assert f'<g class="threshold slo" data-value="{limit * 1000!r}">' in \
            charts[f"latency-{metric}"]
        assert f"SLO {metric} {fmt.millis(limit)}" in charts[f"latency-{metric}"]
    assert "threshold" not in charts["latency-e2e"]    # the SLO does not bound e2e
    assert 'aria-label="request throughput against offered rate"' in charts["requests"]
    assert "prompt + output tok/s" in charts["tokens"]


@pytest.mark.parametrize("kind", ["canaries", "sweeps"])
def test_a_running_run_says_so_and_a_failed_one_shows_its_error(runs: RunsApi,
                                                                 kind: str) -> None:
    running, failed = ((runs.canary_running, runs.canary_failed) if kind == "canaries"
                       else (runs.sweep_running, runs.sweep_failed))
    page = html(runs, f"/ui/{kind}/{running}")
    assert field(page, "status") == "running" and 'id="running"' in page
    page = html(runs, f"/ui/{kind}/{failed}")
    error = api(runs, f"/api/v1/{kind}/{failed}")["error"]
    assert field(page, "status") == "failed" and field(page, "error") == error
    assert "<svg" not in page


@pytest.mark.parametrize("path", ["/ui/canaries/no-such-run", "/ui/sweeps/no-such-run"])
def test_an_unknown_run_is_the_404_page(runs: RunsApi, path: str) -> None:
    page = html(runs, path, 404)
    assert 'id="not-found"' in page and "no-such-run" in page


def test_a_sweep_id_is_no_canary_and_a_canary_id_no_sweep(runs: RunsApi) -> None:
    html(runs, f"/ui/canaries/{runs.sweep}", 404)
    html(runs, f"/ui/sweeps/{runs.live_canary}", 404)


def test_the_run_pages_load_only_the_monitors_own_assets(runs: RunsApi) -> None:
    for path in ("/ui/canaries", "/ui/sweeps", f"/ui/sweeps/{runs.sweep}",
                 f"/ui/canaries/{runs.live_canary}"):
        sources = re.findall(r'(?:src|href)="([^"]*)"', html(runs, path))
        assert not [s for s in sources if s.startswith(("http:", "https:", "//"))]
