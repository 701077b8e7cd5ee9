"""Each page of the UI answers HTML showing the numbers the JSON API gives for the same objects,
formatted as the UI formats them; nothing is fetched from outside the monitor."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from monitor.ui import fmt
from tests.monitor.api.conftest import Api

PAGES = ["/", "/ui/slos", "/ui/slos/availability", "/ui/slos/ttft", "/ui/alerts"]


def get(api: Api, path: str, **params: Any) -> httpx.Response:
    return httpx.get(api.url + path, params=params, timeout=30)


def row(page: str, attribute: str, value: str) -> str:
    """The HTML of the table row whose ``attribute`` is ``value``."""
    found = re.search(rf'<tr {attribute}="{re.escape(value)}".*?</tr>', page, re.S)
    assert found, f"no row {attribute}={value!r}"
    return found.group(0)


def field(page: str, name: str) -> str:
    found = re.search(rf'<dd data-field="{name}">(.*?)</dd>', page, re.S)
    assert found, f"no field {name!r}"
    return found.group(1)


@pytest.mark.parametrize("path", PAGES)
def test_each_page_is_html_that_loads_only_the_monitors_own_assets(ui: Api, path: str) -> None:
    response = get(ui, path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    sources = re.findall(r'(?:src|href)="([^"]*)"', response.text)
    assert sources and not [s for s in sources if s.startswith(("http:", "https:", "//"))]
    for asset in ("/ui/static/ui.css", "/ui/static/ui.js"):
        assert asset in sources


def test_the_stylesheet_and_script_ship_in_the_package(ui: Api) -> None:
    assert get(ui, "/ui/static/ui.css").headers["content-type"].startswith("text/css")
    assert "addEventListener" in get(ui, "/ui/static/ui.js").text
    assert get(ui, "/ui/static/secrets.txt").status_code == 404


def test_an_unknown_slo_is_a_404_page(ui: Api) -> None:
    response = get(ui, "/ui/slos/no-such-slo")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "No SLO &#39;no-such-slo&#39; here." in response.text


def test_the_slo_list_shows_each_slos_numbers_from_the_api(ui: Api) -> None:
    page = get(ui, "/ui/slos").text
    slos = get(ui, "/api/v1/slos").json()["items"]
    assert [s["name"] for s in slos] == ["availability", "ttft"]
    for slo in slos:
        html = row(page, "data-slo", slo["name"])
        assert f'href="/ui/slos/{slo["name"]}"' in html
        for shown in (fmt.percent(slo["objective"]), fmt.percent(slo["sli"]),
                      fmt.percent(slo["budget_remaining"], 1), slo["budget_state"],
                      slo["state"], slo["period"], slo["service"]):
            assert shown in html, (slo["name"], shown)
        assert slo["burn_rates"]
        for burn in slo["burn_rates"]:
            assert f'{burn["window"]}: {fmt.rate(burn["burn_rate"])}' in html


def test_the_slo_list_is_sortable_and_filterable(ui: Api) -> None:
    page = get(ui, "/ui/slos").text
    assert '<table id="slos" class="sortable">' in page and 'id="filter"' in page
    for slo in get(ui, "/api/v1/slos").json()["items"]:
        assert f'data-filter="{slo["name"]} {slo["service"]} ' in row(page, "data-slo",
                                                                        slo["name"])


@pytest.mark.parametrize("name", ["availability", "ttft"])
def test_the_slo_page_shows_the_apis_summary_windows_and_alerts(ui: Api, name: str) -> None:
    page = get(ui, f"/ui/slos/{name}").text
    slo = get(ui, f"/api/v1/slos/{name}").json()
    assert field(page, "sli") == fmt.percent(slo["sli"])
    assert field(page, "budget_remaining") == fmt.percent(slo["budget_remaining"], 1)
    assert field(page, "sustained_burn_rate") == fmt.rate(slo["sustained_burn_rate"])
    assert field(page, "events") == fmt.number(slo["events"], 0)
    for burn in slo["burn_rates"]:
        assert fmt.rate(burn["burn_rate"]) in row(page, "data-window", burn["window"])
    # From the first event where the history is younger than the period, as the charts.
    assert re.search(rf'href="/api/v1/slos/{name}/report\?format=html(&amp;start=\d+)?"', page)
    assert '<figure id="burn-down">' in page and '<figure id="sli">' in page
    alerts = [a for a in get(ui, "/api/v1/alerts").json()["items"]
              if a["labels"].get("slo") == name]
    section = page.split("<h2>Alerts</h2>")[1]
    assert section.count("<tr><td>InferwatchSLO") == len(alerts)


def test_the_burning_slos_conditions_show_their_factors_and_burn_rates(ui: Api) -> None:
    page = get(ui, "/ui/slos/availability").text
    table = page.split('<table id="conditions">')[1].split("</table>")[0]
    firing = get(ui, "/api/v1/alerts", state="firing").json()["items"]
    mine = [a for a in firing if a["labels"].get("slo") == "availability"]
    assert mine, "the fixture's availability SLO burns 50x"
    for alert in mine:
        assert f'<td>{alert["labels"]["window"]}</td>' in table
        assert f'{alert["annotations"]["factor"]}x' in table
        assert alert["annotations"]["burn_rate"] in table
    assert "<td>yes</td>" in table


@pytest.mark.parametrize("name", ["availability", "ttft"])
def test_the_burn_down_is_plotted_from_the_first_event(ui: Api, name: str) -> None:
    """Both SLOs hold 40 stored minutes: the charts draw them a step a minute from the first
    event, the 30-day SLO's too (its period's 3-hour steps held one point: issue 30)."""
    page = get(ui, f"/ui/slos/{name}").text
    assert page.count('<svg class="plot"') == 2
    assert 'aria-label="budget remaining"' in page
    caption = re.search(r'<p class="span" id="chart-span">(.*?)</p>', page)
    assert caption and "from the first event" in caption.group(1)
    assert re.search(r"in \d+ steps of 1m 00s", caption.group(1))
    path = re.search(r'aria-label="budget remaining"[^>]*>.*?<path d="([^"]*)"', page)
    assert path and path.group(1).count("L") >= 38


def test_the_slo_list_draws_a_budget_sparkline_for_each_slo_with_events(ui: Api) -> None:
    page = get(ui, "/ui/slos").text
    for name in ("availability", "ttft"):
        assert '<svg class="spark"' in row(page, "data-slo", name)


def test_the_report_link_of_the_slo_page_answers(ui: Api) -> None:
    response = get(ui, "/api/v1/slos/availability/report", format="html")
    assert response.status_code == 200 and "<html" in response.text.lower()


def test_the_overview_shows_each_targets_state_and_the_series_apis_figures(ui: Api) -> None:
    page = get(ui, "/").text
    window = re.search(r'data-start="([\d.]+)" data-end="([\d.]+)"', page)
    assert window, "the overview says which range its figures cover"
    start, end = window.groups()
    for target in get(ui, "/api/v1/targets").json()["items"]:
        html = row(page, "data-target", target["name"])
        assert f'<span class="state {target["state"]}">{target["state"]}</span>' in html
        assert fmt.when(target["last_scrape_at"]) in html
        shown: dict[str, Callable[[float | None], str]] = {
            "tokens_per_second": fmt.number, "ttft_p99_seconds": fmt.millis,
            "kv_cache_usage_ratio": lambda v: fmt.percent(v, 1)}
        for metric, format_ in shown.items():
            body = get(ui, f"/api/v1/targets/{target['name']}/series", metric=metric,
                       start=start, end=end, step=60).json()
            values = [v for _, v in body["points"] if v is not None and math.isfinite(v)]
            expected = format_(values[-1] if values else None)
            estimates = [e for e in body["estimates"] or [] if e["value"] is not None]
            if estimates:  # a percentile the buckets only bound is shown as its bound
                expected = bound_text(estimates[-1], format_) or expected
            assert re.search(f'data-figure="{metric}"[^>]*>{re.escape(expected)}</td>', html), \
                (metric, expected)


def bound_text(estimate: dict[str, Any], format_: Callable[[float | None], str]) -> str | None:
    """How the overview writes a percentile the buckets only bound (the series API's kind)."""
    lower, upper = format_(estimate["lower"]), format_(estimate["upper"])
    return {"upper_bound": f"< {upper}", "lower_bound": f"> {lower}",
            "interval": f"{lower} – {upper}"}.get(estimate["kind"])


def test_the_overview_lists_the_firing_alerts(ui: Api) -> None:
    page = get(ui, "/").text
    firing = get(ui, "/api/v1/alerts", state="firing").json()["items"]
    section = page.split('<ul id="firing">')[1].split("</ul>")[0]
    assert section.count("<li>") == len(firing) > 0
    assert 'href="/ui/slos/availability"' in section


def test_the_alerts_page_shows_the_alert_book(ui: Api) -> None:
    page = get(ui, "/ui/alerts").text
    alerts = get(ui, "/api/v1/alerts").json()["items"]
    assert alerts
    for alert in alerts:
        html = row(page, "data-fingerprint", alert["fingerprint"])
        assert f'<span class="state {alert["state"]}">' in html
        assert fmt.when(alert["active_at"]) in html
        assert f'window={alert["labels"]["window"]}' in html
