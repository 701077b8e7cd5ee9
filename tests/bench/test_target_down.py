"""bench/target_down.py on short intervals: a target that stops answering is a firing
InferwatchTargetDown in a real Alertmanager after `for` and at most a scrape and an evaluation
interval more, and the alert resolves when the target answers again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench.target_down import run
from tests.monitor.alertmanager_fixture import running_alertmanager


@pytest.mark.integration
def test_a_target_that_stops_answering_alerts_in_alertmanager_after_for(
        tmp_path: Path) -> None:
    with running_alertmanager(tmp_path) as am:
        result = asyncio.run(run(alertmanager_url=am.url, workdir=tmp_path, for_seconds=3.0,
                                 scrape_interval=1.0, evaluation_interval=0.5))
    assert 3.0 <= result.fired_seconds <= result.expected_fire_seconds + 2.0  # a busy machine
    assert result.resolved_seconds <= 1.0 + 0.5 + 2.0
