"""bench/loadgen_vs_vllm.py without vLLM: reading vLLM's result JSON, vLLM's arrival schedule,
the CPU of a client between its load markers, our client's subcommand against the scripted
server, and the side-by-side table."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from bench.loadgen_vs_vllm import (
    ClientRun,
    client_cost,
    main,
    parse_proc_stat,
    ratios,
    run_client,
    runs_of,
    table,
    vllm_arrivals,
    vllm_figures,
)
from tests.monitor.loadgen.scripted_server import Script, scripted_server

# The keys `vllm bench serve --save-result --percentile-metrics ttft,tpot,itl,e2el
# --metric-percentiles 50,99` writes (0.32), with the values of a run here.
VLLM_RESULT = {
    "duration": 31.2, "completed": 60, "failed": 0, "total_input_tokens": 3849,
    "total_output_tokens": 1920, "request_throughput": 1.92, "output_throughput": 61.5,
    "mean_ttft_ms": 45.0, "median_ttft_ms": 40.5, "std_ttft_ms": 9.0, "p50_ttft_ms": 40.5,
    "p99_ttft_ms": 160.0, "median_tpot_ms": 2.6, "p50_tpot_ms": 2.6, "p99_tpot_ms": 9.0,
    "median_itl_ms": 0.01, "p50_itl_ms": 0.01, "p99_itl_ms": 48.9,
    "median_e2el_ms": 122.2, "p50_e2el_ms": 122.2, "p99_e2el_ms": 710.7,
}


def test_vllm_result_figures() -> None:
    figures = vllm_figures(VLLM_RESULT)
    assert figures["ttft_p50"] == 40.5 and figures["ttft_p99"] == 160.0
    assert figures["itl_p99"] == 48.9 and figures["e2e_p50"] == 122.2
    assert figures["tpot_p50"] == 2.6 and figures["output_throughput"] == 61.5
    assert figures["completed"] == 60 and figures["output_tokens"] == 1920


def test_vllm_arrivals_end_at_n_over_rate() -> None:
    arrivals = vllm_arrivals(60, 2.0, seed=0)
    assert len(arrivals) == 60 and arrivals == vllm_arrivals(60, 2.0, seed=0)
    assert 0 < arrivals[0] and all(b >= a for a, b in zip(arrivals, arrivals[1:]))
    assert arrivals[-1] == pytest.approx(30.0)
    assert arrivals != vllm_arrivals(60, 2.0, seed=1)


def test_proc_stat_cpu_seconds() -> None:
    # pid (comm with a space) state ppid ... utime=250 stime=50 (fields 14 and 15)
    line = "4242 (python -m x) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 3 0 100 0 0"
    assert parse_proc_stat(line) == pytest.approx(300 / os.sysconf("SC_CLK_TCK"))


def test_a_clients_cpu_between_its_markers() -> None:
    script = ("import time\nprint('warming up', flush=True)\nprint('LOAD START', flush=True)\n"
              "t = time.process_time()\nwhile time.process_time() - t < 0.3: pass\n"
              "print('LOAD END', flush=True)\n")
    output, load_cpu, total_cpu, wall = run_client([sys.executable, "-c", script],
                                                   "LOAD START", "LOAD END")
    assert "warming up" in output
    assert 0.2 <= load_cpu <= total_cpu and wall >= 0.2
    with pytest.raises(RuntimeError, match="markers"):
        run_client([sys.executable, "-c", "print('no markers')"], "LOAD START", "LOAD END")


def test_our_client_subcommand_writes_vllm_comparable_figures(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"ok {k}", "max_tokens": 4,
                                           "prompt_len": 3}) + "\n" for k in range(6)))
    result = tmp_path / "ours.json"
    with scripted_server(Script(ttft=0.02, itl=0.02)) as (url, script):
        code = main(["client", "--url", url, "--served-model", "m", "--rate", "30",
                     "--prompts", str(prompts), "--result", str(result)])
    assert code == 0
    figures = json.loads(result.read_text())
    assert figures["completed"] == 6 and figures["output_tokens"] == 24
    assert figures["ttft_p50"] >= 20 and 15 <= figures["itl_p50"] < 200
    assert figures["e2e_last_token_p50"] <= figures["e2e_p50"]
    assert figures["output_throughput"] == pytest.approx(24 / figures["duration_s"])
    assert sorted(p for p in script.prompts if p != "ping") == [f"ok {k}" for k in range(6)]


def _run(client: str, scale: float, cpu_ms: float) -> ClientRun:
    figures = {key: value * scale for key, value in vllm_figures(VLLM_RESULT).items()}
    return ClientRun(client, figures, cpu_ms * 0.06, 1.0, 30.0, cpu_ms)


def test_table_ratios_and_verdict(tmp_path: Path) -> None:
    close = [{"vllm": _run("vllm", 1.0, 5.0), "inferwatch": _run("inferwatch", 1.03, 3.0)}]
    assert ratios(close[0]["inferwatch"].figures, close[0]["vllm"].figures)["ttft_p50"] \
        == pytest.approx(1.03)
    text = table(close)
    assert "goal (every mean within 5%): met" in text
    assert "5.00 ms" in text and "3.00 ms" in text
    far = [{"vllm": _run("vllm", 1.0, 5.0), "inferwatch": _run("inferwatch", 1.2, 3.0)}]
    assert "not met: TTFT p50 ms +20.0%" in table(far)
    # --table reads the JSON the bench wrote
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"repetitions": [{k: asdict(v) for k, v in rep.items()}
                                                for rep in close + far]}))
    assert len(runs_of(json.loads(path.read_text()))) == 2
    assert main(["--table", str(path)]) == 0


def test_client_cost_against_the_local_chunked_server() -> None:
    assert 0 < client_cost(10, 100.0) < 100   # CPU ms per request of 32 chunks
