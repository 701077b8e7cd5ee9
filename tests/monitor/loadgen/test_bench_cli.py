"""``inferwatch bench run|sweep`` as a user runs them: files, store records, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.store import open_store
from monitor.store.runs import get_run, list_runs
from tests.monitor.loadgen.scripted_server import Script, scripted_server

WORKLOAD = ["--input-len", "fixed:16", "--output-len", "fixed:4", "--quiet"]


def test_bench_run_writes_records_summary_and_the_store(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    out = tmp_path / "out"
    with scripted_server(Script(ttft=0.02, itl=0.01)) as (server, script):
        code = main(["bench", "run", "--url", server, "--model", "m", "--rate", "20",
                     "--num-requests", "30", "--warmup-requests", "5", *WORKLOAD,
                     "--slo-ttft-ms", "500", "--percentiles", "50,99.9",
                     "--output-dir", str(out), "--store", url, "--name", "smoke",
                     "--peak-qps", "100", "--gpu-hour-price", "2"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "30/30 ok" in printed and "p99.9=" in printed and "capacity plan" in printed
    assert len(script.prompts) == 36       # one endpoint check + 5 warm-up + 30
    rows = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert len(rows) == 35 and sum(r["warmup"] for r in rows) == 5
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"] == 30 and summary["slo_attainment"] == 1.0
    assert summary["capacity"]["plan"]["replicas"] >= 2
    store = open_store(url)
    try:
        (run,) = list_runs(store.engine, "run")
        assert run.name == "smoke" and run.status == "done" and run.finished_at
        assert run.result is not None and run.result["completed"] == 30
        assert "api_key" not in run.config and run.artifacts["requests"].endswith(".jsonl")
        assert get_run(store.engine, run.id) == run
    finally:
        store.close()


def test_bench_sweep_draws_its_curve(tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    with scripted_server(Script(ttft=0.1, itl=0.0, capacity=4)) as (server, _):
        code = main(["bench", "sweep", "--url", server, "--model", "m", "--rates", "4,8,80",
                     "--step-duration", "3", "--refine", "1", "--slo-ttft-ms", "400",
                     "--attainment", "0.9", *WORKLOAD, "--output-dir", str(tmp_path)])
    assert code == 0
    sweep = json.loads((tmp_path / "sweep.json").read_text())
    assert sweep["saturation_rate"] == 80 and sweep["points"][-1]["saturated"]
    assert sweep["max_rate_under_slo"] is not None
    # the capacity per load dimension, for `slo propose` and the monitor's headroom
    assert sweep["slo_seconds"] == {"ttft": 0.4, "tpot": None, "e2e": None}
    dimensions = sweep["dimensions"]
    assert dimensions["capacity"]["requests_per_second"] == dimensions["max_rate"] > 0
    assert dimensions["capacity"]["output_tokens_per_second"] == pytest.approx(
        dimensions["max_rate"] * 4)           # fixed:4 output tokens a request
    assert dimensions["binding"] in ("requests_in_flight", "prompt_tokens_per_second")
    printed = capsys.readouterr().out
    assert "capacity per dimension: requests_per_second" in printed
    assert f"binding dimension: {dimensions['binding']}" in printed
    assert (tmp_path / "sweep.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("args, message", [
    (["--input-len", "normal:3"], "--input-len: 'normal:3' is not fixed:N"),
    (["--prompts", "/nonexistent.jsonl"], "/nonexistent.jsonl: cannot read prompts"),
    (["--rate", "inf"], "an infinite --rate needs --max-concurrency"),
    (["--percentiles", "50,abc"], "--percentiles"),
])
def test_bad_options_are_named(args: list[str], message: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    base = ["bench", "run", "--url", "http://127.0.0.1:9", "--model", "m", "--duration", "1"]
    rate = [] if "--rate" in args else ["--rate", "1"]
    assert main([*base, *rate, *args]) == 2
    assert message in capsys.readouterr().err


def test_an_unreachable_server_stops_before_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "run", "--url", "http://127.0.0.1:9", "--model", "m", "--rate", "1",
                 "--duration", "1", "--timeout", "2"]) == 2
    assert "http://127.0.0.1:9/v1/completions: not reachable" in capsys.readouterr().err
    assert main(["bench", "sweep", "--url", "http://127.0.0.1:9", "--model", "m"]) == 2
    assert "a sweep needs an SLO" in capsys.readouterr().err


def test_a_bad_config_for_the_store_is_named(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "inferwatch.yaml"
    config.write_text("store: {url: 5}\nbogus: 1\n")
    with scripted_server(Script(ttft=0.01, itl=0.0)) as (server, _):
        assert main(["bench", "run", "--url", server, "--model", "m", "--rate", "5",
                     "--num-requests", "2", *WORKLOAD, "--config", str(config)]) == 2
    assert "inferwatch.yaml" in capsys.readouterr().err
