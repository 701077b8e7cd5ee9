"""`inferwatch slo report`: the API's HTML report written from the store, linking the SLO's
UI page under --ui-url (and nothing without it)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from monitor import cli
from tests.monitor.api.conftest import CONFIG, build_state, fill


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with inferwatch.yaml, slos.yaml and the API fixture's filled store.db."""
    folder = tmp_path_factory.mktemp("report-cli")
    state = build_state(folder, None)
    fill(state.store, time.time())
    state.store.close()
    (folder / "inferwatch.yaml").write_text(CONFIG + "slos: [slos.yaml]\n")
    return folder


def report(folder: Path, *extra: str) -> int:
    return cli.main(["slo", "report", "availability", "--config",
                     str(folder / "inferwatch.yaml"), "--store",
                     f"sqlite:///{folder / 'store.db'}", *extra])


def test_the_report_links_the_ui_under_the_given_base(stored: Path, tmp_path: Path) -> None:
    out = tmp_path / "nested" / "availability.html"
    assert report(stored, "--out", str(out), "--ui-url", "https://mon.example:8080/") == 0
    page = out.read_text()
    assert '<a id="ui-link" href="https://mon.example:8080/ui/slos/availability">' in page
    assert "SLO report: availability" in page and 'data-verdict="not-met"' in page
    assert "default-src 'none'" in page


def test_without_a_ui_url_the_report_links_nothing(stored: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert report(stored, "--out", "-", "--start", str(time.time() - 3600)) == 0
    page = capsys.readouterr().out
    assert page.startswith("<!DOCTYPE html>") and 'id="ui-link"' not in page
    assert not re.search(r"""href=["'](?!data:)""", page)


def test_an_unknown_slo_is_exit_status_2(stored: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["slo", "report", "nope", "--config", str(stored / "inferwatch.yaml"),
                     "--out", "-"]) == 2
    assert "no SLO 'nope'" in capsys.readouterr().err
