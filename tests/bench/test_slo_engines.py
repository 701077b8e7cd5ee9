"""Issue 30: a latency SLO is counted on the bucket edges of the engine it reads, by the
monitor's evaluator and by the generated rules in promtool alike (bench.slo_engines, which
writes the per-engine table of docs/slos-on-engines.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import slo_engines_availability as availability
from bench.slo_engines import (
    Outcome,
    bound,
    evaluator_alerts,
    input_series,
    promtool_agrees,
    readme_slos,
    run,
)
from monitor.slo.spec import Slo
from tests.monitor.slo.test_rules import promtool

pytestmark = pytest.mark.integration


def by_key(outcomes: list[Outcome]) -> dict[tuple[str, str, str], Outcome]:
    return {(o.engine, o.slo, o.scenario): o for o in outcomes}


def test_the_readme_slos_page_on_vllm_by_both_paths_and_stay_quiet_when_healthy() -> None:
    outcomes = by_key(run(["vllm"], ["healthy", "slow"], promtool()))
    for name in ("chat-ttft", "chat-itl", "chat-tpot", "chat-e2e-monthly"):
        healthy, slow = outcomes["vllm", name, "healthy"], outcomes["vllm", name, "slow"]
        assert healthy.counted == slow.counted == "exact", name  # vLLM has every edge
        assert healthy.agree and slow.agree, (name, healthy.note, slow.note)
        assert healthy.checks > 250 and slow.checks > 250
        assert healthy.pages is False and slow.pages is True, name


def test_an_off_edge_threshold_is_counted_at_the_edge_below_by_both_paths() -> None:
    ttft = next(s for s in readme_slos() if s.name == "chat-ttft")  # 250 ms; SGLang: 0.2, 0.4
    outcomes = by_key(run(["sglang"], ["healthy", "slow", "between"], promtool(), [ttft]))
    for scenario in ("healthy", "slow", "between"):
        outcome = outcomes["sglang", "chat-ttft", scenario]
        assert outcome.counted == "lower_edge" and outcome.agree, outcome.note
    assert not outcomes["sglang", "chat-ttft", "healthy"].pages
    assert outcomes["sglang", "chat-ttft", "slow"].pages
    # The stated cost: first tokens at 225 ms meet 250 ms but are counted bad at 0.2 s.
    assert outcomes["sglang", "chat-ttft", "between"].pages


def test_an_engine_without_the_histogram_says_so() -> None:
    ttft = next(s for s in readme_slos() if s.name == "chat-ttft")
    slo, counted, why = bound(ttft, "tgi")
    assert slo is None and counted == "no histogram"
    assert "no histogram mapped to gen_ai_server_time_to_first_token_seconds" in why


def test_before_issue_30_the_rule_read_a_bucket_vllm_does_not_have(tmp_path: Path) -> None:
    """The schema's 0.2 s edge on vLLM's page (0.1 and 0.25 around it): the evaluator pages on
    the slow hour, the rule's bucket is empty, and promtool finds none of the alerts."""
    old = Slo.model_validate({"name": "chat-ttft", "objective": 0.99, "window": "30d",
                              "sli": {"kind": "latency", "metric": "ttft",
                                      "threshold_seconds": 0.2}})
    on_vllm = Slo.model_validate({**old.model_dump(), "sli": {
        **old.sli.model_dump(), "engine": "vllm", "off_edge": "lower_edge"}})
    ours = evaluator_alerts(on_vllm, "slow", tmp_path / "store.db")
    assert any(ours)
    # The page the rules read is vLLM's, but the rule is the schema's (le="0.2").
    page = input_series(on_vllm, "slow")
    assert not any('le="0.2"' in series for series, _ in page)
    agree, _, output = promtool_agrees(old, "slow", ours, tmp_path, promtool(),
                                       page=page)
    assert not agree and "got:[]" in output.replace(" ", "").replace("\n", "")


def test_availability_sees_each_engines_failures_by_both_paths() -> None:
    """vLLM's error finishes and 5xx, TGI's and Triton's failure counters, through each
    engine's table, page the README's availability SLO in both paths; the 400s of a client
    count only for an SLO that lists bad_request."""
    outcomes = {(o.engine, o.slo, o.scenario): o for o in availability.run(
        ["vllm"], ["healthy", "engine", "client"], promtool())}
    outcomes.update({(o.engine, o.slo, o.scenario): o for o in availability.run(
        ["tgi", "triton"], ["engine"], promtool())})
    assert all(o.agree for o in outcomes.values()), [o.note for o in outcomes.values()]
    readme, strict = "chat-availability", "availability-with-4xx"
    assert not outcomes["vllm", readme, "healthy"].pages
    for engine in ("vllm", "tgi", "triton"):
        assert outcomes[engine, readme, "engine"].pages, engine
    assert not outcomes["vllm", readme, "client"].pages
    assert outcomes["vllm", strict, "client"].pages
    # 30 of 130 requests refused as the client's error
    assert outcomes["vllm", strict, "client"].error_ratio == pytest.approx(30 / 130)
    # 15 streamed error finishes + 15 answered 500 (both an error finish and a 5xx) of 100:
    # the stated double count, (15 + 2 x 15) / (100 + 15)
    assert outcomes["vllm", readme, "engine"].error_ratio == pytest.approx(45 / 115)
    assert outcomes["tgi", readme, "engine"].error_ratio == pytest.approx(0.3)
