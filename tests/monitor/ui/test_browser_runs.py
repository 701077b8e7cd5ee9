"""The canary and sweep pages in a real headless Chromium: each loads with nothing on its
console and its script runs to the end; a link of each list opens its run's page; a screenshot
of each page is kept under $INFERWATCH_ARTIFACTS/ui (or the test's temporary directory)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser import console_messages, dump_dom, screenshot
from tests.monitor.ui.runs_data import RunsApi, served_runs

PAGES = ["canaries", "sweeps", "sweep", "canary-live", "canary-stored", "sweep-running",
         "canary-failed", "sweep-missing"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunsApi]:
    with served_runs(tmp_path_factory.mktemp("ui-runs")) as served:
        yield served


def url(runs: RunsApi, name: str) -> str:
    path = {"canaries": "/ui/canaries", "sweeps": "/ui/sweeps",
            "sweep": f"/ui/sweeps/{runs.sweep}",
            "canary-live": f"/ui/canaries/{runs.live_canary}",
            "canary-stored": f"/ui/canaries/{runs.stored_canary}",
            "sweep-running": f"/ui/sweeps/{runs.sweep_running}",
            "canary-failed": f"/ui/canaries/{runs.canary_failed}",
            "sweep-missing": "/ui/sweeps/no-such-run"}[name]
    return runs.api.url + path


@pytest.mark.integration
@pytest.mark.parametrize("name", PAGES)
def test_chromium_loads_the_run_page_with_a_silent_console(runs: RunsApi, name: str) -> None:
    assert console_messages(url(runs, name)) == []


@pytest.mark.integration
@pytest.mark.parametrize("name", PAGES)
def test_chromium_runs_the_run_pages_script_to_the_end(runs: RunsApi, name: str) -> None:
    assert 'data-ready="1"' in dump_dom(url(runs, name))


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["canaries", "sweeps"])
def test_a_link_of_each_run_list_opens_the_runs_page(runs: RunsApi, kind: str) -> None:
    listing = dump_dom(url(runs, kind))
    target = runs.live_canary if kind == "canaries" else runs.sweep
    links = re.findall(rf'<a href="(/ui/{kind}/[^"]+)">', listing)
    assert f"/ui/{kind}/{target}" in links
    detail = dump_dom(runs.api.url + f"/ui/{kind}/{target}")
    assert 'id="summary"' in detail and '<span class="state done"' in detail
    assert detail.count('<svg class="chart') >= 4   # its charts are in the DOM


@pytest.mark.integration
@pytest.mark.parametrize("name", PAGES)
def test_chromium_screenshots_each_run_page(runs: RunsApi, name: str, artefacts: Path) -> None:
    shot = screenshot(url(runs, name), artefacts / f"runs-{name}.png", height=2400)
    assert shot.stat().st_size > 5_000  # a page with content, not a blank PNG
