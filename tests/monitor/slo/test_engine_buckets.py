"""``inferwatch slo buckets --engine vllm``: vLLM's --custom-histogram-buckets from SLO files,
so that every latency threshold is an edge (issue 21)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from monitor import cli
from monitor.slo.engine_buckets import FLAG, VLLM_FAMILIES, page_edges, plan_vllm
from monitor.slo.loaders import load_slos
from monitor.slo.spec import LatencySli
from tests.exporters.engine_fixtures import read_fixture
from tests.exporters.vllm_edges import LIVE_PAGE, vllm_edges

DEMO_SLOS = Path(__file__).resolve().parents[3] / "alerts" / "slos"


def test_the_defaults_are_the_edges_vllm_0_32_serves() -> None:
    for family in VLLM_FAMILIES.values():
        for histogram in family.histograms:
            assert vllm_edges(histogram) == family.defaults, histogram


OFF_EDGE_SLOS = """slos:
  - {name: chat-ttft, objective: 0.99, window: 30d,
     sli: {kind: latency, metric: ttft, threshold_seconds: 200ms}}
  - {name: chat-itl, objective: 0.99, window: 28d,
     sli: {kind: latency, metric: itl, threshold_seconds: 50ms}}
"""


def test_the_demo_thresholds_are_edges_of_vllm_already(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["slo", "buckets", "--engine", "vllm", "--json", str(DEMO_SLOS)]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {} and "no flag needed" in err


def test_every_threshold_becomes_an_edge(capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    (tmp_path / "slos.yaml").write_text(OFF_EDGE_SLOS)
    assert cli.main(["slo", "buckets", "--engine", "vllm", str(tmp_path / "slos.yaml")]) == 0
    out, err = capsys.readouterr()
    flag, value = shlex.split(out.strip())
    assert flag == FLAG
    overrides = json.loads(value)
    latency = [s.sli for s in load_slos(tmp_path / "slos.yaml")
               if isinstance(s.sli, LatencySli)]
    assert latency
    for sli in latency:
        family = VLLM_FAMILIES[sli.metric]
        edges = overrides.get(family.key, family.defaults)
        assert sli.threshold_seconds in edges, (sli.metric, sli.threshold_seconds)
    for key, edges in overrides.items():  # what vLLM's validator accepts
        assert edges == sorted(set(edges)) and all(e > 0 for e in edges), key
    # chat-ttft's 200 ms is not a vLLM TTFT edge (0.1, 0.25 around it): one series added.
    assert 0.2 in overrides["time_to_first_token"]
    assert "0.2s for chat-ttft" in err and "1 more series per model" in err


def test_series_added_count_each_histogram_of_a_family() -> None:
    slos = load_slos(DEMO_SLOS)
    e2e = [s.model_copy(update={"sli": LatencySli(metric="e2e", threshold_seconds=0.2)})
           for s in slos[:1]]
    plan = plan_vllm(e2e)
    (family,) = plan.families
    assert family.family.key == "request_latency" and family.added == (0.2,)
    assert plan.series_per_model == 5  # e2e, queue, inference, prefill and decode histograms


def test_a_page_whose_edges_have_the_thresholds_needs_no_flag(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    page = read_fixture(LIVE_PAGE).replace('le="0.25"', 'le="0.2"')  # a 0.2 s TTFT edge
    assert 0.2 in page_edges(page, "page")["vllm:time_to_first_token_seconds"]
    (tmp_path / "metrics.prom").write_text(page)
    (tmp_path / "slos.yaml").write_text(OFF_EDGE_SLOS)
    assert cli.main(["slo", "buckets", "--engine", "vllm", "--page",
                     str(tmp_path / "metrics.prom"), "--json",
                     str(tmp_path / "slos.yaml")]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == {} and "no flag needed" in err


def test_an_unreadable_slo_file_is_exit_status_2(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["slo", "buckets", "--engine", "vllm", str(tmp_path / "none.yaml")]) == 2
    assert "inferwatch slo buckets" in capsys.readouterr().err
