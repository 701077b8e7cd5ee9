"""The generated vLLM scrape job and recording rules, run by a real Prometheus against a live
vLLM (0.32, CPU build, the tiny model), give the series the bridge makes of the same page at
the same moment (name, labels, value), except the differences README.md lists ("What the
generated configuration cannot reproduce"), and exactly those.

tests/exporters/test_promconfig_prometheus.py compares the two on recorded pages; this one on
the engine itself, after real requests filled its counters and histograms. The engine is idle
while the two are compared: the page the bridge reads must equal one fetched before
Prometheus' last scrape, else the comparison is retried on a later pair.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from exporters.promconfig.cli import generated_files
from monitor.loadgen import LengthDist, WorkloadSpec, send_requests
from monitor.stack.prometheus import host_port, prometheus_binary, prometheus_config
from tests.exporters.promconfig_stack import (
    VLLM_VALUE_FROM_LABEL,
    Page,
    differences,
    page_of,
    prometheus_series,
    running_prometheus,
    wait_evaluated,
)
from tests.integration import unavailable
from tests.live.vllm_server import START_TIMEOUT_SECONDS, RunningVllm

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.live_engine,
              pytest.mark.timeout(START_TIMEOUT_SECONDS + 300)]  # it may start vLLM

ENGINE = "vllm"
NUM_REQUESTS, RATE = 8, 4.0
# Pairs of (page, Prometheus) taken until the page stood still across one: vLLM may update a
# gauge (requests running, KV-cache usage) a step after the last response reached the client.
# No mapped series of vLLM 0.32 moves while it is idle (no time-based gauge), so none is
# excluded; one that did would fail the test by name ("kept changing").
ATTEMPTS = 5
# The differences the recorded page of the same engine has (the same entry as there).
KNOWN = set(VLLM_VALUE_FROM_LABEL)
# Filled by the requests: the comparison covers non-zero histograms and counters.
FILLED = ("gen_ai_server_time_to_first_token_seconds_count",
          "gen_ai_server_inter_token_latency_seconds_count",
          "gen_ai_server_request_duration_seconds_count",
          "gen_ai_server_iteration_tokens_count",
          "gen_ai_server_prompt_tokens_total",
          "gen_ai_server_generation_tokens_total")


def generated_config(workdir: Path, target: str) -> dict[str, Any]:
    """prometheus.yml from the generated files as a user loads them: the vLLM job (its
    targets pointed at ``target``) and its rule file beside the configuration; scrapes and
    evaluations every second. (Also test_vllm_slo_paths', with its SLO rules added.)"""
    files = generated_files([ENGINE])
    generated = yaml.safe_load(files[f"{ENGINE}-scrape.yml"])
    assert generated["rule_files"] == [f"{ENGINE}-rules.yml"]
    (workdir / f"{ENGINE}-rules.yml").write_text(files[f"{ENGINE}-rules.yml"], encoding="utf-8")
    [job] = generated["scrape_configs"]
    assert job["job_name"] == ENGINE
    job["static_configs"] = [{"targets": [target]}]
    config = prometheus_config({}, interval_seconds=1, rule_files=generated["rule_files"])
    config["scrape_configs"].append(job)
    return config


@pytest.fixture
def prometheus(vllm: RunningVllm, tmp_path: Path) -> Iterator[str]:
    binary = prometheus_binary()
    if binary is None:
        unavailable("prometheus is not installed (apt-get install prometheus)")
    # start_prometheus writes prometheus.yml into tmp_path: the relative rule file resolves.
    with running_prometheus(binary, tmp_path, generated_config(tmp_path,
                                                               host_port(vllm.url))) as url:
        wait_evaluated(url, 1)
        yield url


def _load(vllm: RunningVllm) -> None:
    spec = WorkloadSpec(input_len=LengthDist("uniform", 16, 64),
                        output_len=LengthDist("uniform", 8, 24), seed=11)
    records = asyncio.run(send_requests(vllm.url, vllm.model,
                                        spec.requests(NUM_REQUESTS, RATE), timeout_seconds=60))
    failed = [(r.status, r.error_type, r.error) for r in records if not r.ok]
    assert len(records) == NUM_REQUESTS and not failed, failed


def _page(vllm: RunningVllm) -> Page:
    page = page_of("vllm-live.prom", httpx.get(vllm.metrics_url, timeout=10).text)
    assert page is not None and page.engines == (ENGINE,), page
    return page


def test_prometheus_gives_the_series_the_bridge_gives_on_a_live_vllm(
        vllm: RunningVllm, prometheus: str) -> None:
    _load(vllm)
    started = time.monotonic()
    previous, attempts = _page(vllm).bridge, 0
    while True:
        attempts += 1
        # A scrape that started after ``previous`` was read, and the rules evaluated on it.
        wait_evaluated(prometheus, 1, scraped_after=datetime.now(UTC))
        scraped = prometheus_series(prometheus, ENGINE)
        bridge = _page(vllm).bridge
        changed = differences(previous, bridge)
        # Done when the page stood still from before the scrape until after the query.
        if not changed or attempts == ATTEMPTS:
            break
        previous = bridge
    print(f"compared {len(bridge)} series {time.monotonic() - started:.1f} s after the load "
          f"(attempt {attempts})")
    assert not changed, f"the idle engine's page kept changing: {sorted(changed)}"
    for name in FILLED:
        assert sum(v for (n, _), v in bridge.items() if n == name) > 0, name
    assert differences(bridge, scraped) == KNOWN
