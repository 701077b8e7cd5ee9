"""The anomaly rule files (base and seasonal) in a real vmalert over a real VictoriaMetrics:
every rule evaluates without an error (MetricsQL accepts each query as written), and the
recorded signals land in storage with the values worked out from the imported series."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from monitor.stack.processes import Service
from monitor.stack.victoriametrics import (
    start_victoria_metrics,
    start_vm_tool,
    victoria_metrics_binaries,
)
from tests.exporters.sharded_stack import query
from tests.integration import unavailable
from tests.monitor.anomaly.test_promql_rules import RULE_FILE
from tests.monitor.anomaly.test_promql_seasonal import SEASONAL_FILE

pytestmark = [pytest.mark.integration, pytest.mark.slow]

INTERVAL = "2s"  # the groups' 1m, shortened so the test sees several evaluations
TARGET = 'job="engine",instance="e0:8000"'
MINUTES = 60
RULE_FILES = (RULE_FILE, SEASONAL_FILE)  # the seasonal rules find no history: no series, no error


def _import_text(now_ms: int) -> str:
    """An hour of one-minute points up to now: 3 waiting, 10 req/s of 100 tokens each."""
    lines = []
    for k in range(MINUTES + 1):
        t = now_ms - (MINUTES - k) * 60_000
        lines += [f"gen_ai_server_requests_waiting{{{TARGET}}} 3 {t}",
                  f"gen_ai_server_requests_total{{{TARGET}}} {600 * k} {t}",
                  f"gen_ai_server_prompt_tokens_total{{{TARGET}}} {30_000 * k} {t}",
                  f"gen_ai_server_generation_tokens_total{{{TARGET}}} {30_000 * k} {t}"]
    return "\n".join(lines) + "\n"


def _fast_rules(directory: Path, rule_file: Path) -> Path:
    groups = yaml.safe_load(rule_file.read_text())
    for group in groups["groups"]:
        group["interval"] = INTERVAL
    path = directory / rule_file.name
    path.write_text(yaml.safe_dump(groups, sort_keys=False, width=1_000_000))
    return path


@pytest.fixture()
def vmalert(tmp_path: Path) -> Iterator[tuple[Service, Service]]:
    binaries = victoria_metrics_binaries()
    if binaries is None:
        unavailable("victoria-metrics or vmalert is not installed (apt-get install "
                    "victoria-metrics)")
    vm = start_victoria_metrics(binaries["victoria-metrics"], tmp_path / "vm")
    try:
        httpx.post(f"{vm.url}/api/v1/import/prometheus", timeout=10,
                   content=_import_text(int(time.time() * 1000))).raise_for_status()
        argv = [binaries["vmalert"], *(f"-rule={_fast_rules(tmp_path, f)}" for f in RULE_FILES),
                f"-datasource.url={vm.url}", f"-remoteWrite.url={vm.url}",
                f"-remoteRead.url={vm.url}", "-remoteWrite.flushInterval=1s",
                "-notifier.url=http://127.0.0.1:9"]  # nothing fires on steady series
        alert = start_vm_tool("vmalert", argv, tmp_path / "vmalert")
        try:
            yield vm, alert
        finally:
            alert.stop()
    finally:
        vm.stop()


def _rules(url: str) -> list[dict[str, Any]]:
    groups = httpx.get(f"{url}/api/v1/rules", timeout=10).json()["data"]["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _evaluated(rule: dict[str, Any]) -> bool:
    return not str(rule.get("lastEvaluation", "")).startswith("0001-")  # Go's zero time


def _wait_for(check: Any, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(1.0)


def test_vmalert_evaluates_every_rule_without_error_and_records_the_signals(
        vmalert: tuple[Service, Service]) -> None:
    vm, alert = vmalert
    ratio = _wait_for(lambda: query(vm.url, "inferwatch_target:tokens_per_second:baseline_ratio"))
    assert ratio, "no baseline ratio recorded in time"
    rules = _wait_for(lambda: all(map(_evaluated, found := _rules(alert.url))) and found)
    assert rules, "vmalert did not evaluate every rule in time"
    assert len(rules) == sum(len(g["rules"]) for f in RULE_FILES
                             for g in yaml.safe_load(f.read_text())["groups"])
    assert [(r["name"], r["lastError"]) for r in rules if r.get("lastError")] == []
    # 1,000 tokens/s at 10 req/s; the baseline is the throughput itself (ratio 1).
    assert float(ratio[0]["value"][1]) == pytest.approx(1.0)
    [tokens] = query(vm.url, "inferwatch_target:tokens_per_second")
    assert float(tokens["value"][1]) == pytest.approx(1000.0)
    [queue] = query(vm.url, "inferwatch_target:queue_depth")
    assert float(queue["value"][1]) == 3.0
