"""The alert history in a real headless Chromium: the SLO page with its timeline and episodes
and the alerts page with its recent changes load with nothing on the console and their script
runs to the end; a screenshot of each is kept under $INFERWATCH_ARTIFACTS/ui (or the test's
temporary directory), as test_browser.py keeps its own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser import console_messages, dump_dom, screenshot
from tests.monitor.api.conftest import Api

PAGES = {"slo-availability-history": "/ui/slos/availability",
         "alerts-history": "/ui/alerts"}


@pytest.mark.integration
@pytest.mark.parametrize("name", list(PAGES), ids=list(PAGES))
def test_the_history_pages_load_silently_and_are_kept_as_screenshots(
        ui: Api, name: str, artefacts: Path) -> None:
    url = ui.url + PAGES[name]
    assert console_messages(url) == []
    dom = dump_dom(url)
    assert 'data-ready="1"' in dom
    if name == "alerts-history":
        assert len(re.findall(r'<tr data-event="\d+"', dom)) == 7
    else:
        assert len(re.findall(r'<rect class="episode (?:page|ticket)"', dom)) == 4
        assert len(re.findall(r"<tr data-episode=", dom)) == 4
    # Tall enough to reach the history at the foot of the SLO page.
    shot = screenshot(url, artefacts / f"{name}.png", height=2400)
    assert shot.stat().st_size > 5_000  # a page with content, not a blank PNG
