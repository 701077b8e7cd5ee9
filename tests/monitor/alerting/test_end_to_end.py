"""The proof end to end: faults injected into the reference server under load page through a
real Alertmanager in the workbook's detection time, and a clean run pages nobody.
(`python -m bench.slo_detection` prints the same figures for docs/benchmarks.md.)"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench import slo_detection
from tests.monitor.alertmanager_fixture import running_alertmanager

SCRAPE_SECONDS = 5.0
EVALUATION_SECONDS = 2.0


@pytest.mark.waits
@pytest.mark.timeout(600)
def test_injected_faults_page_in_the_workbooks_time_and_a_clean_run_does_not(
        tmp_path: Path) -> None:
    with running_alertmanager(tmp_path) as am:
        result = asyncio.run(slo_detection.run(
            alertmanager_url=am.url, rate=3.0, scrape_interval=SCRAPE_SECONDS,
            evaluation_interval=EVALUATION_SECONDS, clean_seconds=30.0,
            clean_check_seconds=15.0, fault_timeout=180.0, workdir=tmp_path))
    assert result.clean_pages == []
    assert [d.slo for d in result.detections] == ["e2e-availability", "e2e-ttft"]
    for d in result.detections:
        # The 1h/5m page first (every window holds steady history), in about the workbook's
        # 51.8 s plus a scrape; never sooner than the burn itself allows.
        assert d.paged_windows.startswith("1h/5m"), d
        workbook = d.theoretical_seconds - SCRAPE_SECONDS
        assert 0.9 * workbook <= d.measured_seconds <= 1.3 * d.theoretical_seconds, d
