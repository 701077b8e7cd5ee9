"""inferwatch against a live vLLM (0.32, CPU build, the tiny model): what the engine's page says,
normalized by the vLLM table and read by the collector with the engine auto-detected, equals
what the real `openai` client saw on the same requests, token for token."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping

import httpx
import openai
import pytest

from exporters.adapters import normalize
from exporters.exposition import parse_page
from exporters.schema import GENERATION_TOKENS, PROMPT_TOKENS, PROMPT_TOKENS_CACHED, REQUESTS
from monitor.collect.collector import Collector
from monitor.collect.config import MonitorConfig
from monitor.cli import main
from monitor.collect.snapshot import Snapshot, TargetState, split_key
from tests.live.vllm_server import START_TIMEOUT_SECONDS, RunningVllm

# The first live test also waits for vLLM to start (the session's server): up to
# START_TIMEOUT_SECONDS on a busy machine, so the test's own limit is above it.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.live_engine,
              pytest.mark.timeout(START_TIMEOUT_SECONDS + 300)]

MAX_TOKENS = 12


def client_usage(vllm: RunningVllm, requests: int) -> dict[str, int]:
    """``requests`` requests (completions and chat, half each, ``MAX_TOKENS`` generated with
    EOS ignored) through the real openai client; the token counts its responses carried."""
    client = openai.OpenAI(base_url=f"{vllm.url}/v1", api_key="none", timeout=120)
    totals = {"prompt": 0, "completion": 0, "requests": 0}
    for k in range(requests):
        extra = {"ignore_eos": True}
        if k % 2:
            chat = client.chat.completions.create(
                model=vllm.model, max_tokens=MAX_TOKENS, extra_body=extra,
                messages=[{"role": "user", "content": f"request {k}: count the tokens"}])
            usage = chat.usage
        else:
            completion = client.completions.create(
                model=vllm.model, max_tokens=MAX_TOKENS, extra_body=extra,
                prompt=f"request {k}: a prompt of a few words for the tiny model")
            usage = completion.usage
        assert usage is not None
        totals["prompt"] += usage.prompt_tokens
        totals["completion"] += usage.completion_tokens
        totals["requests"] += 1
    assert totals["completion"] == requests * MAX_TOKENS  # ignore_eos: every request ran out
    return totals


def normalized_totals(vllm: RunningVllm) -> dict[str, float]:
    page = normalize(parse_page(httpx.get(vllm.metrics_url, timeout=10).text, vllm.url), "vllm")

    def total(name: str, **match: str) -> float:
        return sum(s.value for f in page.families for s in f.samples
                   if s.name == f"{name}_total" and all(s.labels.get(k) == v
                                                        for k, v in match.items()))
    return {"prompt": total(PROMPT_TOKENS), "cached": total(PROMPT_TOKENS_CACHED),
            "completion": total(GENERATION_TOKENS),
            "length": total(REQUESTS, finish_reason="length")}


def test_the_normalized_page_counts_what_the_client_saw(vllm: RunningVllm) -> None:
    before = normalized_totals(vllm)
    usage = client_usage(vllm, 6)
    after = normalized_totals(vllm)
    delta = {key: after[key] - before[key] for key in after}
    assert delta["completion"] == usage["completion"]
    # The schema's prompt tokens are those computed; with vLLM's prefix cache on, the rest
    # were cache hits: together, every prompt token the client was charged for.
    assert delta["prompt"] + delta["cached"] == usage["prompt"]
    assert delta["length"] == usage["requests"]


def _sum(snapshots: list[Snapshot], name: str) -> float:
    return sum(value for s in snapshots for key, value in s.counters.items()
               if split_key(key)[0] == f"{name}_total")


def test_the_collector_detects_vllm_and_stores_exact_increases(vllm: RunningVllm) -> None:
    config = MonitorConfig.model_validate({"targets": [
        {"name": "vllm-0", "url": vllm.metrics_url, "engine": "auto"}]})
    snapshots: list[Snapshot] = []

    async def main() -> Mapping[str, int]:
        async with Collector(config, snapshots.append) as collector:
            await collector.scrape_once()            # FIRST: the baseline
            usage = await asyncio.to_thread(client_usage, vllm, 4)
            collector._targets["vllm-0"].next_due = None  # due again now
            await collector.scrape_once()
            return usage

    usage = asyncio.run(main())
    assert [s.state for s in snapshots] == [TargetState.FIRST, TargetState.UP]
    up = snapshots[1:]
    assert _sum(up, GENERATION_TOKENS) == usage["completion"]
    assert _sum(up, PROMPT_TOKENS) + _sum(up, PROMPT_TOKENS_CACHED) == usage["prompt"]


def test_doctor_finds_every_family_of_the_live_engine_decided(
        vllm: RunningVllm, capsys: pytest.CaptureFixture[str]) -> None:
    """The version-aware mapping, verified on the live page: `inferwatch doctor` reads the
    engine's own version, and every family it exposes is mapped, not mapped with a reason, or
    ignored by a stated rule (exit 0); a new family nobody decided about would exit 1."""
    status = main(["doctor", vllm.metrics_url, "--json"])
    body = json.loads(capsys.readouterr().out)
    assert body["engines"] == ["vllm"]
    assert body["version"]["value"] == "0.32.0"
    assert (body["coverage"]["undecided"], body["coverage"]["missing"]) == ([], [])
    assert status == 0 and body["complete"] is True
