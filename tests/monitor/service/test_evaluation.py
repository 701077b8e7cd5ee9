"""The evaluation loop `inferwatch serve` builds (monitor/service/evaluation.py) waits for the
data of PromQL targets: their windows are read ``promql_delay_seconds`` after they end, so a
minute closes that much later than ``alerting.settle_seconds`` alone would say, or its last
windows would reach the store after the evaluator had counted it closed, and be lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.collect.config import MonitorConfig, parse_config
from monitor.collect.snapshot import Snapshot, TargetState, series_key
from monitor.service.evaluation import evaluation_loop
from monitor.slo.spec import Slo
from monitor.store import open_store

README = Path(__file__).parents[3] / "README.md"
T0 = 1_800_000_000.0  # a multiple of 60
INTERVAL = 15.0
DELAY = 30.0
WRITE_LAG = 1.0  # the recorder writes a moment after the window is read
REQUESTS_PER_WINDOW = 10
SLO = Slo.model_validate({"name": "availability", "objective": 0.99, "window": "1d",
                          "sli": {"kind": "availability", "errors": ["rejected"]}})


def config(selector: str | None) -> MonitorConfig:
    target = {"name": "engine", "url": "http://127.0.0.1:8428", "promql_selector": selector,
              "promql_delay_seconds": DELAY, "scrape_interval_seconds": INTERVAL}
    return MonitorConfig.model_validate({"targets": [target],
                                         "alerting": {"settle_seconds": 30}})


def window(end: float) -> Snapshot:
    key = series_key("gen_ai_server_requests_total", {"model": "tiny", "finish_reason": "stop"})
    return Snapshot("engine", end - INTERVAL, end, TargetState.UP,
                    counters={key: float(REQUESTS_PER_WINDOW)})


@pytest.mark.parametrize(("selector", "settle"), [(None, 30.0), ('job="vllm"', 60.0)],
                         ids=["scraped: the settle time", "PromQL: the settle time + delay"])
def test_minutes_close_after_the_settle_time_and_the_promql_delay(
        selector: str | None, settle: float, tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    store.migrate()
    try:
        loop = evaluation_loop(config(selector), store, [SLO])
        assert loop.evaluator is not None and loop.anomalies is not None
        assert loop.evaluator.settle_seconds == loop.anomalies.settle_seconds == settle
    finally:
        store.close()


def test_a_promql_targets_late_windows_are_all_counted(tmp_path: Path) -> None:
    """Ten minutes of windows, each stored DELAY + WRITE_LAG after it ends (as the collector
    reads a PromQL target), the loop evaluating every interval: every request is counted.
    With the settle time alone (30 s) the window ending on each minute's end arrived a second
    after the minute was closed, and 10 of the 40 windows were missing."""
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    store.migrate()
    try:
        loop = evaluation_loop(config('job="vllm"'), store, [SLO])
        ends = [T0 + INTERVAL * k for k in range(1, 41)]
        pending = list(ends)
        now = T0
        while now <= ends[-1] + 120:
            arrived = [end for end in pending if end + DELAY + WRITE_LAG <= now]
            if arrived:
                store.write([window(end) for end in arrived])
                pending = [end for end in pending if end not in arrived]
            loop.evaluate(now)
            now += INTERVAL
        (status,) = loop.statuses
        assert status.events == REQUESTS_PER_WINDOW * len(ends)
    finally:
        store.close()


def test_the_readmes_victoria_metrics_config_is_valid_and_waits_for_the_delay() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("#### `inferwatch serve` on VictoriaMetrics or Prometheus"):]
    block = section[section.index("```yaml\n") + 8:]
    config = parse_config(block[:block.index("```")], "README.md")
    assert [t.promql_selector is not None for t in config.targets] == [True, True]
    assert config.settle_seconds == 30 + 30  # alerting.settle_seconds + promql_delay_seconds
