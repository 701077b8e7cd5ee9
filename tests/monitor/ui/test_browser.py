"""The UI in a real headless Chromium: each page loads with nothing on its console and its
script runs to the end; a link from the SLO list opens the detail page; a screenshot of each
page is kept under $INFERWATCH_ARTIFACTS/ui (or the test's temporary directory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser import console_messages, dump_dom, screenshot
from tests.monitor.api.conftest import Api

PAGES = {"overview": "/", "slos": "/ui/slos", "slo-availability": "/ui/slos/availability",
         "alerts": "/ui/alerts", "slo-missing": "/ui/slos/no-such-slo"}


@pytest.mark.integration
@pytest.mark.parametrize("name", list(PAGES), ids=list(PAGES))
def test_chromium_loads_the_page_with_a_silent_console(ui: Api, name: str) -> None:
    assert console_messages(ui.url + PAGES[name]) == []


@pytest.mark.integration
@pytest.mark.parametrize("name", ["overview", "slos", "slo-availability", "alerts"])
def test_chromium_runs_the_pages_script_to_the_end(ui: Api, name: str) -> None:
    assert 'data-ready="1"' in dump_dom(ui.url + PAGES[name])


@pytest.mark.integration
def test_a_link_of_the_slo_list_opens_the_slo_page(ui: Api) -> None:
    listing = dump_dom(ui.url + "/ui/slos")
    links = re.findall(r'<a href="(/ui/slos/[^"]+)">', listing)
    assert links == ["/ui/slos/availability", "/ui/slos/ttft"]
    detail = dump_dom(ui.url + links[1])
    assert "<title>SLO ttft · inferwatch</title>" in detail and 'id="summary"' in detail


@pytest.mark.integration
@pytest.mark.parametrize("name", list(PAGES), ids=list(PAGES))
def test_chromium_screenshots_each_page(ui: Api, name: str, artefacts: Path) -> None:
    shot = screenshot(ui.url + PAGES[name], artefacts / f"{name}.png", height=1200)
    assert shot.stat().st_size > 5_000  # a page with content, not a blank PNG
