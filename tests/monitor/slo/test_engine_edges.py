"""Issue 30: a latency SLO is counted at the bucket edges of the engine it reads. A threshold
off them is refused with the engine's nearest edges and the flag that adds one, or with
``off_edge: lower_edge`` counted at the edge below in the rules as in the monitor; never a
rule that reads a bucket the engine does not have."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from exporters.adapters.edges import engine_edges, known_engines, page_edges
from monitor.cli import main
from monitor.slo import rules
from monitor.slo.bind import EngineBindError, bind_engine, bind_to_targets
from monitor.slo.edges import counted_at
from monitor.slo.spec import LatencySli, Slo
from tests.exporters.engine_fixtures import read_fixture
from tests.exporters.vllm_edges import LIVE_PAGE, vllm_edges

TTFT = "gen_ai_server_time_to_first_token_seconds"


def ttft_slo(threshold: float, **sli: object) -> Slo:
    return Slo.model_validate({"name": "chat-ttft", "objective": 0.99, "window": "30d",
                               "sli": {"kind": "latency", "metric": "ttft",
                                       "threshold_seconds": threshold, **sli}})


@pytest.mark.parametrize(("schema_name", "vllm_name"), [
    (TTFT, "vllm:time_to_first_token_seconds"),
    ("gen_ai_server_inter_token_latency_seconds", "vllm:inter_token_latency_seconds"),
    ("gen_ai_server_time_per_output_token_seconds",
     "vllm:request_time_per_output_token_seconds"),
    ("gen_ai_server_request_duration_seconds", "vllm:e2e_request_latency_seconds"),
], ids=["ttft", "itl", "tpot", "e2e"])
def test_vllms_edges_are_those_its_live_page_has(schema_name: str, vllm_name: str) -> None:
    assert engine_edges("vllm").edges(schema_name) == vllm_edges(vllm_name)


def test_the_edges_read_off_a_live_page_are_the_tables() -> None:
    engine, found = page_edges(read_fixture(LIVE_PAGE), LIVE_PAGE)
    assert engine == "vllm" and found[TTFT] == engine_edges("vllm").edges(TTFT)


def test_tgis_edges_are_its_geometric_series() -> None:
    edges = engine_edges("tgi").edges("gen_ai_server_request_duration_seconds")
    assert edges is not None and len(edges) == 35
    assert all(math.isclose(e, 0.0001 * 1.5 ** k) for k, e in enumerate(edges, 1))


def test_every_known_engine_has_edges_for_schema_histograms_only() -> None:
    assert set(known_engines()) >= {"inferwatch", "vllm", "sglang", "tgi", "triton", "llamacpp"}
    for engine in known_engines():
        for histogram, edges in engine_edges(engine).histograms.items():
            assert histogram.startswith("gen_ai_server_") and list(edges) == sorted(edges)


@pytest.mark.parametrize(("threshold", "edge", "lower", "upper"), [
    (0.25, 0.25, 0.25, 0.25),   # an edge: exact
    (0.2, 0.1, 0.1, 0.25),      # between 0.1 and 0.25: the edge below
    (0.0005, None, None, 0.001),  # under the first edge: nothing is good
], ids=["edge", "between", "below-all"])
def test_where_a_threshold_is_counted_on_vllms_ttft(threshold: float, edge: float | None,
                                                    lower: float | None,
                                                    upper: float | None) -> None:
    where = counted_at(vllm_edges("vllm:time_to_first_token_seconds"), threshold)
    assert (where.edge, where.lower, where.upper) == (edge, lower, upper)
    assert where.exact == (threshold == 0.25)


def test_an_off_edge_threshold_on_vllm_is_refused_with_its_edges_and_flag() -> None:
    with pytest.raises(ValidationError) as error:
        ttft_slo(0.2, engine="vllm")
    message = str(error.value)
    assert "not a bucket edge of gen_ai_server_time_to_first_token_seconds on vllm 0.32" in message
    assert "nearest edges: 0.1s and 0.25s" in message
    assert ("--custom-histogram-buckets '{\"time_to_first_token\":[0.001,0.005,0.01,0.02,"
            "0.04,0.06,0.08,0.1,0.2,0.25,") in message
    assert "off_edge: lower_edge" in message


def test_custom_edges_as_the_engine_was_started_with_them_make_it_exact() -> None:
    slo = ttft_slo(0.2, engine="vllm", edges=[0.1, 0.2, 0.25])
    assert isinstance(slo.sli, LatencySli) and slo.sli.counted_at.exact
    assert rules.latency_le(slo.sli) == "0.2"


def test_lower_edge_counts_at_the_edge_below_and_says_so_in_the_rules() -> None:
    slo = ttft_slo(0.2, engine="vllm", off_edge="lower_edge")
    assert isinstance(slo.sli, LatencySli) and rules.latency_le(slo.sli) == "0.1"
    document = yaml.safe_load(rules.generate_rules([slo]))
    exprs = [r["expr"] for g in document["groups"] for r in g["rules"]]
    assert any(f'{TTFT}_bucket{{le="0.1"}}' in e for e in exprs)
    assert not any('le="0.2"' in e for e in exprs)
    pages = [r for g in document["groups"] for r in g["rules"]
             if r.get("labels", {}).get("slo") == "chat-ttft" and "alert" in r
             and "sli_note" in r.get("annotations", {})]
    assert pages and "counted at 0.1s, the nearest edge below" in \
        pages[0]["annotations"]["sli_note"]


def test_an_engine_without_the_histogram_cannot_carry_the_slo() -> None:
    with pytest.raises(ValidationError, match="llamacpp b11434 has no histogram mapped"):
        ttft_slo(0.25, engine="llamacpp")


def test_binding_names_the_slo_and_keeps_other_kinds() -> None:
    availability = Slo.model_validate({"name": "avail", "objective": 0.999, "window": "30d",
                                       "sli": {"kind": "availability"}})
    assert bind_engine([availability, ttft_slo(0.25)], "vllm")[0] == availability
    with pytest.raises(EngineBindError, match=r"^SLO chat-ttft: threshold 0.2s"):
        bind_engine([ttft_slo(0.2)], "vllm")


def test_targets_of_one_declared_engine_bind_the_slo_and_auto_leaves_it() -> None:
    (on_vllm,) = bind_to_targets([ttft_slo(0.25)], [("v", {}, "vllm")])
    assert isinstance(on_vllm.sli, LatencySli) and on_vllm.sli.engine == "vllm"
    (unknown,) = bind_to_targets([ttft_slo(0.25)], [("v", {}, "vllm"), ("r", {}, "auto")])
    assert isinstance(unknown.sli, LatencySli) and unknown.sli.engine is None
    with pytest.raises(EngineBindError, match="threshold 0.2s is not a bucket edge"):
        bind_to_targets([ttft_slo(0.2)], [("v", {}, "vllm")])


def test_targets_that_count_a_threshold_at_different_edges_are_refused() -> None:
    lenient = ttft_slo(0.3, off_edge="lower_edge")  # vLLM: 0.25, SGLang: 0.2
    with pytest.raises(EngineBindError, match="at different edges .*one SLO per engine"):
        bind_to_targets([lenient], [("v", {}, "vllm"), ("s", {}, "sglang")])


def test_rules_generate_refuses_an_off_edge_slo_for_vllm(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "slos.yaml"
    spec.write_text("slos:\n  - {name: chat-ttft, objective: 0.99, window: 30d,\n"
                    "     sli: {kind: latency, metric: ttft, threshold_seconds: 200ms}}\n")
    out = tmp_path / "out"
    assert main(["rules", "generate", "--slos", str(spec), "--out", str(out)]) == 0
    assert main(["rules", "generate", "--engine", "vllm", "--slos", str(spec),
                 "--out", str(out)]) == 2
    assert "nearest edges: 0.1s and 0.25s" in capsys.readouterr().err
    page = tmp_path / "metrics.prom"
    page.write_text(read_fixture(LIVE_PAGE).replace('le="0.25"', 'le="0.2"'))
    assert main(["rules", "generate", "--page", str(page), "--slos", str(spec),
                 "--out", str(out)]) == 0  # the live engine has the edge: counted exactly
    assert 'first_token_seconds_bucket{le="0.2"}' in \
        (out / "inferwatch-slo.rules.yml").read_text()


def test_rules_generate_reads_the_engines_from_the_config(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "slos.yaml").write_text(
        "slos:\n  - {name: chat-ttft, objective: 0.99, window: 30d,\n"
        "     sli: {kind: latency, metric: ttft, threshold_seconds: 200ms}}\n")
    (tmp_path / "inferwatch.yaml").write_text(
        "targets:\n  - {name: vllm-0, url: 'http://127.0.0.1:8000/metrics', engine: vllm}\n"
        "slos: [slos.yaml]\n")
    assert main(["rules", "generate", "--config", str(tmp_path / "inferwatch.yaml"),
                 "--slos", str(tmp_path / "slos.yaml"), "--out", str(tmp_path / "o")]) == 2
    assert "SLO chat-ttft: threshold 0.2s is not a bucket edge" in capsys.readouterr().err
