"""The targets API says what a batch utilization is computed against (issue 21): vLLM
snapshots (the recorded page, given the target's configured limits as the collector gives
them) stored over ten minutes, read back through the series route."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from monitor.collect.config import TargetConfig
from monitor.collect.limits import ConfiguredLimits
from monitor.collect.snapshot import Snapshot
from monitor.ui.fmt import DASH
from tests.monitor.api.conftest import CONFIG, Api, served_api
from tests.monitor.collect.test_batch_limits import AFTER, BEFORE, scraped
from tests.monitor.store.builders import SCRAPE_SECONDS

LIMITS = {"seqs": {"max_num_seqs": 8, "max_num_batched_tokens": 2048},
          "budget": {"max_num_batched_tokens": 1024}, "none": {}}
TARGETS = "".join(
    f'  - {{name: vllm-{name}, url: "http://127.0.0.1:9/metrics", engine: vllm, '
    f"labels: {{model: tiny}}{''.join(f', {k}: {v}' for k, v in limits.items())}}}\n"
    for name, limits in LIMITS.items())


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with served_api(tmp_path, config_yaml=CONFIG + TARGETS) as served:
        yield served


def store_vllm(api: Api, name: str, end: float) -> None:
    target = api.state.config().target(name)
    one = scraped(BEFORE, AFTER, target, name)
    api.state.store.write([
        dataclasses.replace(one, start=t - SCRAPE_SECONDS, end=t)
        for t in (end - 900 + SCRAPE_SECONDS * k for k in range(1, 61))])


def series(api: Api, name: str, metric: str, end: float) -> dict[str, Any]:
    response = httpx.get(f"{api.url}/api/v1/targets/{name}/series", timeout=30,
                         params={"metric": metric, "start": end - 600, "end": end, "step": 60})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_the_series_route_says_which_limit_batch_utilization_is_against(api: Api) -> None:
    end = api.now // 60 * 60 - 120
    for name in LIMITS:
        store_vllm(api, f"vllm-{name}", end)

    seqs = series(api, "vllm-seqs", "batch_utilization", end)
    assert [v for _, v in seqs["points"]] == [0.5] * 10  # 4 running of the configured 8
    assert seqs["batch_utilization_source"] == "configured_max_num_seqs"
    tokens = series(api, "vllm-seqs", "token_budget_utilization", end)
    assert [v for _, v in tokens["points"]] == [0.25] * 10  # 512 tokens a step of 2048
    assert tokens["batch_utilization_source"] == "token_budget"

    budget = series(api, "vllm-budget", "batch_utilization", end)
    assert [v for _, v in budget["points"]] == [0.5] * 10  # 512 of 1024
    assert budget["batch_utilization_source"] == "token_budget"

    unknown = series(api, "vllm-none", "batch_utilization", end)
    assert all(v is None for _, v in unknown["points"])  # no limit known: null, never 0
    assert unknown["batch_utilization_source"] is None

    # The overview's batch cell says it too, on hover.
    overview = httpx.get(f"{api.url}/", timeout=30).text
    cells = re.findall(r'<td class="num" data-figure="batch_utilization"([^>]*)>([^<]*)</td>',
                       overview)
    assert sorted(cells) == sorted([
        ("", DASH), ("", DASH), ("", DASH),  # ref-0, ref-1, vllm-none: no value
        (' title="against configured_max_num_seqs"', "50.0%"),
        (' title="against token_budget"', "50.0%")])


def test_a_target_shows_its_configured_limits(api: Api) -> None:
    body = httpx.get(f"{api.url}/api/v1/targets/vllm-seqs", timeout=30).json()
    assert (body["max_num_seqs"], body["max_num_batched_tokens"]) == (8, 2048)
    other = httpx.get(f"{api.url}/api/v1/targets/ref-0", timeout=30).json()
    assert (other["max_num_seqs"], other["max_num_batched_tokens"]) == (None, None)


def test_an_engine_exported_limit_is_said_to_be_the_engines(api: Api) -> None:
    """The same vLLM snapshots with the limit unmarked, as an engine exporting it gives it."""
    end = api.now // 60 * 60 - 120
    target: TargetConfig = api.state.config().target("vllm-none")
    marked = scraped(BEFORE, AFTER, target.model_copy(update={"max_num_seqs": 8}), "vllm-none")
    exported = {key.replace(',limit_source="config"', ""): stats
                for key, stats in marked.gauges.items()}
    one: Snapshot = dataclasses.replace(marked, gauges=exported)
    assert ConfiguredLimits("vllm-none", 8, None).apply(one) is one  # nothing to add
    api.state.store.write([dataclasses.replace(one, start=t - SCRAPE_SECONDS, end=t)
                           for t in (end - 900 + SCRAPE_SECONDS * k for k in range(1, 61))])
    body = series(api, "vllm-none", "batch_utilization", end)
    assert [v for _, v in body["points"]] == [0.5] * 10
    assert body["batch_utilization_source"] == "engine_limit"
