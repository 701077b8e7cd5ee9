"""Batch utilization of a live vLLM (issue 21), which exports no batch limit: the collector
scrapes it with the limits it runs with given in the config, while concurrent requests run.

The package's vLLM starts with the defaults of vLLM 0.32's OpenAI server on a CPU
(vllm/engine/arg_utils.py, ``get_batch_defaults``): 128 sequences and 2048 tokens a step."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from monitor.collect.collector import Collector
from monitor.collect.config import MonitorConfig
from monitor.collect.derive import derive
from monitor.collect.limits import BatchSource
from monitor.collect.snapshot import Snapshot, TargetState, merge_snapshots
from tests.live.vllm_server import START_TIMEOUT_SECONDS, RunningVllm

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.live_engine,
              pytest.mark.timeout(START_TIMEOUT_SECONDS + 300)]

MAX_NUM_SEQS, MAX_NUM_BATCHED_TOKENS = 128, 2048  # vLLM 0.32's CPU defaults
CONCURRENT, MAX_TOKENS = 8, 200


async def _scrape_under_load(vllm: RunningVllm, config: MonitorConfig) -> list[Snapshot]:
    sunk: list[Snapshot] = []
    now = [0.0]
    async with Collector(config, sunk.append, clock=lambda: now[0]) as collector:
        await collector.scrape_once()  # the baseline
        async with httpx.AsyncClient(timeout=120) as client:
            sends = [asyncio.create_task(client.post(f"{vllm.url}/v1/completions", json={
                "model": vllm.model, "prompt": f"request {k}: a prompt for the tiny model",
                "max_tokens": MAX_TOKENS, "ignore_eos": True})) for k in range(CONCURRENT)]
            while not all(send.done() for send in sends):  # a reading every 0.1 s
                await asyncio.sleep(0.1)
                now[0] += 10.0  # the fake clock: every scrape is due
                await collector.scrape_once()
            for send in sends:
                assert (await send).status_code == 200
        now[0] += 10.0
        await collector.scrape_once()
    return sunk


def test_batch_utilization_of_a_live_vllm_from_its_configured_limits(
        vllm: RunningVllm) -> None:
    config = MonitorConfig.model_validate({"targets": [{
        "name": "vllm", "url": vllm.metrics_url, "engine": "vllm",
        "scrape_interval_seconds": 10, "scrape_timeout_seconds": 5,  # a busy machine
        "max_num_seqs": MAX_NUM_SEQS, "max_num_batched_tokens": MAX_NUM_BATCHED_TOKENS}]})
    snapshots = asyncio.run(_scrape_under_load(vllm, config))
    assert all(s.state is not TargetState.DOWN for s in snapshots)
    readings = [derive(s) for s in snapshots]
    # Some scrape saw requests running: at most the concurrent ones, of 128.
    busiest = max(d.batch_utilization for d in readings)
    assert 0 < busiest <= CONCURRENT / MAX_NUM_SEQS
    window = derive(merge_snapshots("vllm", snapshots))
    assert 0 < window.batch_utilization <= 1
    assert window.batch_utilization_source is BatchSource.CONFIGURED_MAX_NUM_SEQS
    # Every step scheduled at most its budget; at least one token a step.
    assert 1 / MAX_NUM_BATCHED_TOKENS <= window.token_budget_utilization <= 1
