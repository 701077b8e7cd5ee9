"""A young SLO's pages (issue 30): ten minutes of data on a 30-day SLO draw both charts a point
a minute from the first event, say which span they draw, and the budget says it is that of the
events seen in a partial period (tests/monitor/api/young_slo.py works the numbers out); in a
real Chromium too, with a screenshot kept under $INFERWATCH_ARTIFACTS/ui."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from monitor.ui import fmt
from tests.browser import console_messages, screenshot
from tests.monitor.api.conftest import Api
from tests.monitor.api.young_slo import BUDGET_REMAINING, served_young
from tests.monitor.ui.test_pages import field, row

PAGE = "/ui/slos/young-ttft"


@pytest.fixture(scope="module")
def young(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Api, float]]:
    with served_young(tmp_path_factory.mktemp("young-ui")) as served:
        yield served


def get(api: Api, path: str) -> str:
    response = httpx.get(api.url + path, timeout=30)
    assert response.status_code == 200, path
    return response.text


@pytest.mark.parametrize("label", ["budget remaining", "SLI"])
def test_both_charts_draw_a_point_a_minute_from_the_first_event(
        young: tuple[Api, float], label: str) -> None:
    api, first_minute = young
    page = get(api, PAGE)
    plot = re.search(rf'<svg class="plot"[^>]*aria-label="{label}" data-start="([\d.]+)"'
                     rf'[^>]*>.*?<path d="([^"]*)"', page)
    assert plot, f"no {label} chart"
    assert float(plot.group(1)) == first_minute
    assert plot.group(2).count("L") >= 9  # ten minutes: ten points at least
    assert "no data in the range" not in page


def test_the_page_says_what_span_the_charts_draw(young: tuple[Api, float]) -> None:
    api, first_minute = young
    page = get(api, PAGE)
    caption = re.search(r'<p class="span" id="chart-span">(.*?)</p>', page)
    assert caption, "the charts say what they draw"
    assert f"from the first event, {fmt.when(first_minute)}" in caption.group(1)
    assert "the history seen so far of the 30d period" in caption.group(1)
    assert "steps of 1m 00s" in caption.group(1)
    assert "<h2>Budget burn-down over the history seen</h2>" in page
    assert f'report?format=html&amp;start={first_minute:.0f}"' in page


def test_the_budget_says_it_is_of_the_events_seen_in_a_partial_period(
        young: tuple[Api, float]) -> None:
    api, _ = young
    page = get(api, PAGE)
    slo = httpx.get(api.url + "/api/v1/slos/young-ttft", timeout=30).json()
    assert field(page, "budget_remaining") == fmt.percent(BUDGET_REMAINING, 1) == "-3900.0%"
    assert "<dt>budget left so far</dt>" in page
    basis = re.search(r'<dd data-field="budget_basis" data-basis="partial"[^>]*>(.*?)</dd>',
                      page)
    assert basis, "the page says the budget is a partial period's"
    assert basis.group(1) == fmt.budget_basis("partial", slo["observed_seconds"], 800, "30d",
                                              BUDGET_REMAINING).replace("'", "&#39;")
    assert "the 800 events of the 11m" in basis.group(1)
    assert "a partial period, not yet the 30d period&#39;s budget" in basis.group(1)
    assert "40.00x its budget spent" in basis.group(1)


def test_the_list_marks_the_partial_budget_and_draws_its_sparkline(
        young: tuple[Api, float]) -> None:
    api, _ = young
    for _ in range(20):  # the sparklines are drawn off the request: "…" until then
        html = row(get(api, "/ui/slos"), "data-slo", "young-ttft")
        if '<svg class="spark"' in html:
            break
    assert '<svg class="spark"' in html and "from the first event" in html
    assert re.search(r'<span class="basis partial" title="budget of the 800 events[^"]*">'
                     r"of 11m \d\ds seen</span>", html)


def test_an_slo_without_events_says_so_instead_of_empty_charts(
        young: tuple[Api, float]) -> None:
    page = get(young[0], "/ui/slos/idle")
    assert "no events stored in the period yet" in page
    assert field(page, "budget_remaining") == "—"
    assert '<dd data-field="budget_basis" data-basis="none">no events yet</dd>' in page


@pytest.mark.integration
def test_chromium_shows_the_young_slos_page(young: tuple[Api, float], artefacts: Path) -> None:
    api, _ = young
    assert console_messages(api.url + PAGE) == []
    shot = screenshot(api.url + PAGE, artefacts / "slo-young.png", height=1100)
    assert shot.stat().st_size > 5_000
