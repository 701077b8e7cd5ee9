"""bench/ui_load.py at smoke sizes: the state it builds shows every overview figure and an
evaluated state per SLO, and one run measures the API, the pages and Chromium's Navigation
Timing over the DevTools pipe."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest

from bench.stack import sqlite_store
from bench.ui_load import NAVIGATION_FIELDS, PAGES, build_state, run
from monitor.ui import views
from tests.browser import chromium


def test_the_state_has_every_figure_and_evaluated_slos(tmp_path: Path) -> None:
    with sqlite_store(tmp_path / "ui.db") as store:
        state = build_state(store, 20, 5, 0.5, time.time())
        overview = views.overview(state)
        assert len(overview.targets) == 5
        for row in overview.targets:
            assert row.target.state == "up"
            assert None not in row.figures.values(), row.figures
        slos = views.slos(state)
        assert len(slos) == 20
        assert all(s.state in ("ok", "burning") and s.sli is not None and s.burn_rates
                   for s in slos), [(s.name, s.state) for s in slos]


@pytest.mark.integration
def test_one_run_times_the_api_the_pages_and_chromium(tmp_path: Path) -> None:
    args = argparse.Namespace(slos=20, targets=5, hours=0.5, repeat=1, cold=1,
                              history_targets=1, history_days=1,
                              chromium=chromium(), json=tmp_path / "ui_load.json")
    results = run(args)
    assert (tmp_path / "ui_load.json").is_file()
    assert set(results["api"]) == {"GET /api/v1/slos", "GET /api/v1/targets"}
    assert all(r["median"] > 0 and r["bytes"] > 0 for r in results["html"].values())
    for path in PAGES.values():
        timing = {f: results["browser"][path][f]["median"] for f in NAVIGATION_FIELDS}
        assert 0 < timing["responseEnd"] <= timing["domContentLoadedEventEnd"] \
            <= timing["loadEventEnd"], timing
    assert results["cold"]["httpx"] and results["cold"]["browser"]["loadEventEnd"] > 0
