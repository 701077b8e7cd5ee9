"""Batch utilization for engines that do not export their batch limits (issue 21): the
target's configured max_num_seqs, the token budget against vLLM's tokens-per-step histogram,
and which of them a figure is computed against. Fed with the recorded vLLM 0.32 page."""

from __future__ import annotations

import logging
import math

import pytest
import yaml

from exporters import schema
from monitor.collect.collector import Collector
from monitor.collect.config import ConfigError, MonitorConfig, TargetConfig, parse_config
from monitor.collect.deltas import build_snapshot
from monitor.collect.derive import derive, merge_replicas
from monitor.collect.limits import CONFIGURED, LIMIT_SOURCE, BatchSource, ConfiguredLimits
from monitor.collect.scrape import normalize_text, read_page
from monitor.collect.snapshot import Snapshot, TargetState, merge_snapshots, series_key
from tests.monitor.collect.test_collector import (
    T0,
    Reply,
    ScriptedServer,
    collect,
    page,
    scrape_every_interval,
    server,  # noqa: F401 (the fixture)
)
from tests.monitor.collect.vllm_pages import vllm_page

SEQS, ENGINE = BatchSource.CONFIGURED_MAX_NUM_SEQS, BatchSource.ENGINE_LIMIT
VLLM_LABELS = {"engine": "0", "model": "tiny"}


def scraped(before: str, after: str, target: TargetConfig, name: str = "vllm-0") -> Snapshot:
    """The UP snapshot of two scrapes 15 s apart, normalized as the scrape source does and
    given the target's configured limits as the collector gives them."""
    readings = [read_page(normalize_text(text, target, 10**7)) for text in (before, after)]
    snapshot = build_snapshot(name, readings[0], readings[1], T0, T0 + 15)
    return ConfiguredLimits(name, target.max_num_seqs,
                            target.max_num_batched_tokens).apply(snapshot)


def vllm_target(**limits: int) -> TargetConfig:
    return TargetConfig(name="vllm-0", url="http://127.0.0.1:9/metrics", engine="vllm",
                        **limits)


# 4 of 8 sequences running; 10 steps of 512 tokens against a 2048-token budget.
BEFORE, AFTER = vllm_page(running=1), vllm_page(running=4, steps=10, tokens_per_step=512)


def test_vllm_exports_no_batch_limit_so_without_a_config_nothing_is_claimed() -> None:
    d = derive(scraped(BEFORE, AFTER, vllm_target()))
    assert math.isnan(d.batch_utilization) and d.batch_utilization_source is None
    assert math.isnan(d.token_budget_utilization)  # the steps are there, the budget is not


def test_the_configured_max_num_seqs_and_token_budget_give_vllm_its_utilizations() -> None:
    snapshot = scraped(BEFORE, AFTER, vllm_target(max_num_seqs=8, max_num_batched_tokens=2048))
    # The limits sit next to the running requests, marked as configured.
    limit = series_key(schema.BATCH_SIZE_MAX, {**VLLM_LABELS, LIMIT_SOURCE: CONFIGURED})
    assert snapshot.gauges[limit].last == 8
    d = derive(snapshot)
    assert d.batch_utilization == 0.5 and d.batch_utilization_source is SEQS  # 4 of 8
    assert d.token_budget_utilization == 0.25  # 5120 tokens / 10 steps / 2048
    # A model filter keeps the limit (it carries the running series' labels).
    assert derive(snapshot, {"model": "tiny"}).batch_utilization == 0.5
    assert math.isnan(derive(snapshot, {"model": "other"}).batch_utilization)


def test_only_a_token_budget_gives_the_token_budget_utilization_said_so() -> None:
    d = derive(scraped(BEFORE, AFTER, vllm_target(max_num_batched_tokens=1024)))
    assert d.batch_utilization == d.token_budget_utilization == 0.5  # 512 of 1024 a step
    assert d.batch_utilization_source is BatchSource.TOKEN_BUDGET


def test_no_engine_step_in_the_window_is_no_token_budget_utilization_not_zero() -> None:
    d = derive(scraped(BEFORE, vllm_page(running=0), vllm_target(max_num_batched_tokens=1024)))
    assert math.isnan(d.token_budget_utilization) and d.batch_utilization_source is None


def test_a_first_scrape_has_the_limit_a_down_one_nothing() -> None:
    limits = ConfiguredLimits("vllm-0", 8, None)
    reading = read_page(normalize_text(BEFORE, vllm_target(), 10**7))
    first = limits.apply(build_snapshot("vllm-0", None, reading, T0, T0))
    assert derive(first).batch_utilization == 1 / 8
    down = Snapshot("vllm-0", T0, T0 + 15, TargetState.DOWN, "refused")
    assert limits.apply(down) is down


def test_windows_and_replicas_weigh_the_configured_limits_as_exported_ones() -> None:
    target = vllm_target(max_num_seqs=8, max_num_batched_tokens=2048)
    one = scraped(BEFORE, AFTER, target, "vllm-0")  # 4 running, 512 tokens a step
    other = scraped(vllm_page(), vllm_page(running=2, steps=30, tokens_per_step=1024), target,
                    "vllm-1")  # 2 running, 1024 tokens a step
    pair = merge_replicas("vllm", [one, other])
    d = derive(pair)
    assert d.batch_utilization == 6 / 16 and d.batch_utilization_source is SEQS
    # (10 x 512 + 30 x 1024) tokens over 40 steps, against one step's budget (not two)
    assert d.token_budget_utilization == pytest.approx((5120 + 30720) / 40 / 2048)
    first = ConfiguredLimits("vllm-0", 8, 2048).apply(build_snapshot(
        "vllm-0", None, read_page(normalize_text(BEFORE, target, 10**7)), T0 - 15, T0 - 15))
    window = derive(merge_snapshots("vllm-0", [first, one]))
    assert window.batch_utilization == (1 + 4) / 2 / 8  # mean running over the two readings


ENGINE_PAGE = "\n".join([  # a reference-server-like page that exports its limit: 16
    page(100, running=4).body.decode().rstrip("\n"),
    f"# TYPE {schema.BATCH_SIZE_MAX} gauge", f'{schema.BATCH_SIZE_MAX}{{model="m"}} 16', ""])


def test_the_engines_own_limit_wins_and_a_disagreeing_config_is_logged_once(
        server: ScriptedServer, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    url = server.script("/metrics", Reply(ENGINE_PAGE.encode()))
    config = MonitorConfig.model_validate(
        {"targets": [{"name": "ref", "url": url, "max_num_seqs": 8}]})
    with caplog.at_level(logging.WARNING, logger="monitor.collect.limits"):
        got = collect(config, lambda c, clock: scrape_every_interval(c, clock, 3))
    assert [s.state for s in got] == [TargetState.FIRST, TargetState.UP, TargetState.UP]
    d = derive(got[-1])
    assert d.batch_utilization == 4 / 16 and d.batch_utilization_source is ENGINE
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == ["target ref: the engine reports gen_ai_server_batch_size_max = 16 but "
                        "the config says max_num_seqs: 8; using the engine's"]


def test_the_collector_gives_a_vllm_target_its_configured_limits(
        server: ScriptedServer) -> None:  # noqa: F811
    url = server.script("/metrics", Reply(BEFORE.encode()), Reply(AFTER.encode()))
    config = parse_config(f"""
targets:
  - {{name: vllm-0, url: "{url}", engine: vllm, max_num_seqs: 8,
     max_num_batched_tokens: 2048}}
""", "inferwatch.yaml")
    first, up = collect(config, lambda c, clock: scrape_every_interval(c, clock, 2))
    d = derive(up)
    assert (d.batch_utilization, d.batch_utilization_source) == (0.5, SEQS)
    assert d.token_budget_utilization == 0.25
    assert derive(first).batch_utilization == 1 / 8


def test_a_config_edit_of_the_limits_starts_the_target_over_with_the_new_ones(
        server: ScriptedServer) -> None:  # noqa: F811
    url = server.script("/metrics", Reply(AFTER.encode()))
    old = MonitorConfig.model_validate(
        {"targets": [{"name": "v", "url": url, "engine": "vllm", "max_num_seqs": 8}]})
    new = MonitorConfig.model_validate(
        {"targets": [{"name": "v", "url": url, "engine": "vllm", "max_num_seqs": 16}]})

    async def steps(collector: Collector, clock: object) -> None:
        await collector.scrape_once()
        collector.apply_config(new)
        await collector.scrape_once()

    before, after = collect(old, steps)  # type: ignore[arg-type]
    assert derive(before).batch_utilization == 4 / 8
    assert derive(after).batch_utilization == 4 / 16


@pytest.mark.parametrize(("target", "needle"), [
    ({"max_num_seqs": 0}, "targets[0].max_num_seqs: Input should be greater than or equal to 1"),
    ({"max_num_batched_tokens": "many"}, "targets[0].max_num_batched_tokens"),
    ({"max_num_seq": 8}, "did you mean 'max_num_seqs'?"),
])
def test_bad_limits_are_config_errors(target: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_of({"name": "v", "url": "http://127.0.0.1:9/metrics", **target})
    assert needle in str(caught.value)


def config_of(target: dict[str, object]) -> MonitorConfig:
    return parse_config(yaml.safe_dump({"targets": [target]}), "inferwatch.yaml")
