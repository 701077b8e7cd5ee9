"""The silences page in headless Chromium, with a real Alertmanager's silences and with none
reachable: a silent console, the script run to the end, a screenshot kept under
$INFERWATCH_ARTIFACTS/ui (or the test's temporary directory) as tests/monitor/ui/test_browser.py
keeps the other pages'."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser import console_messages, dump_dom, screenshot
from tests.monitor.api.conftest import Api, served_api
from tests.monitor.ui.silences_fixture import SilencedUi, config_with, silenced_ui
from tests.processes import free_port


@pytest.fixture(scope="module")
def silences(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SilencedUi]:
    with silenced_ui(tmp_path_factory.mktemp("silences-browser")) as found:
        yield found


@pytest.fixture(scope="module")
def unreachable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    config = config_with(f"http://127.0.0.1:{free_port()}")
    with served_api(tmp_path_factory.mktemp("unreachable"), config_yaml=config) as served:
        yield served


@pytest.mark.integration
@pytest.mark.parametrize("query", ["", "?expired=1"])
def test_the_silences_page_loads_with_a_silent_console(silences: SilencedUi,
                                                       query: str) -> None:
    url = silences.ui.url + "/ui/silences" + query
    assert console_messages(url) == []
    dom = dump_dom(url)
    assert 'data-ready="1"' in dom and silences.active in dom
    assert (silences.expired in dom) == bool(query)


@pytest.mark.integration
def test_the_page_of_an_unreachable_alertmanager_loads_with_a_silent_console(
        unreachable: Api) -> None:
    url = unreachable.url + "/ui/silences"
    assert console_messages(url) == []
    assert "cannot connect" in dump_dom(url)


@pytest.mark.integration
def test_chromium_screenshots_the_silences_pages(silences: SilencedUi, unreachable: Api,
                                                 artefacts: Path) -> None:
    for name, url in (("silences", silences.ui.url + "/ui/silences?expired=1"),
                      ("silences-unreachable", unreachable.url + "/ui/silences")):
        shot = screenshot(url, artefacts / f"{name}.png", height=800)
        assert shot.stat().st_size > 5_000, name
