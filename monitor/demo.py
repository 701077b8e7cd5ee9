"""`inferwatch demo`: the embedded stack on one machine.

For now: start the reference server on CPU, send it a short Poisson load, and print
tokens/s and latency percentiles measured by the client beside what the server's own
/metrics reports. Later issues add the monitor, alerting and dashboards here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx

from monitor.loadgen import LengthDist, WorkloadSpec, send_requests, summarize

_LISTENING = re.compile(r"listening on (http://\S+)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="tiny")
    p.add_argument("--num-requests", type=int, default=60)
    p.add_argument("--rate", type=float, default=4.0, help="Poisson arrival rate, requests/s")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--startup-timeout", type=float, default=120.0)


@contextlib.contextmanager
def reference_server(extra_args: list[str], startup_timeout: float,
                     cpus: set[int] | None = None) -> Iterator[str]:
    """Start `inferwatch reference-server --port 0` as a child (on ``cpus`` only, when given);
    yield its base URL."""
    cmd = [sys.executable, "-m", "monitor.cli", "--log-level", "WARNING", "reference-server",
           "--port", "0", *extra_args]
    pin = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, preexec_fn=pin)
    try:
        yield _wait_for_url(proc, startup_timeout)
    finally:
        _stop(proc)


def _wait_for_url(proc: subprocess.Popen[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            raise RuntimeError("reference server exited during start:\n" + "".join(seen))
        seen.append(line)
        if match := _LISTENING.search(line):
            return match.group(1)
    raise RuntimeError(f"reference server did not start in {timeout:g} s:\n" + "".join(seen))


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _server_view(base_url: str) -> str:
    text = httpx.get(f"{base_url}/metrics", timeout=10).text
    wanted = ("gen_ai_server_generation_tokens_total", "gen_ai_server_prompt_tokens_total",
              "gen_ai_server_requests_total", "gen_ai_server_preemptions_total",
              "gen_ai_server_kv_cache_usage_ratio")
    lines = [ln for ln in text.splitlines() if ln.startswith(wanted)]
    return "\n".join("  " + ln for ln in lines)


def run(args: argparse.Namespace) -> int:
    spec = WorkloadSpec(input_len=LengthDist("lognormal", 200, 0.6),
                        output_len=LengthDist("lognormal", 64, 0.6),
                        chars_per_token=1.0, seed=args.seed)   # the byte-level tokenizer
    workload = spec.requests(args.num_requests, args.rate)
    print(f"starting the reference server (model {args.model}) ...", flush=True)
    try:
        with reference_server(["--model", args.model], args.startup_timeout) as url:
            print(f"server at {url}; sending {len(workload)} requests at {args.rate:g} req/s "
                  "(Poisson, lognormal lengths, streaming)", flush=True)
            records = asyncio.run(send_requests(url, args.model, workload))
            print(summarize(records).format())
            print("the server's own /metrics (normalized schema):")
            print(_server_view(url))
    except KeyboardInterrupt:
        print("interrupted; server stopped", file=sys.stderr)
        return 130
    return 0
