"""What `inferwatch gateway` adds: the same upstream, direct and through the gateway, in one run.

The upstream streams a fixed script (first token after --first-ms, then --chunks chunks every
--interval-ms), so what the gateway adds stands out of a flat baseline. Upstream and gateway
each run in their own process (the gateway as `python -m monitor.cli gateway`, as users run
it); the client here sends --requests requests at --concurrency per arm and times each chunk
as it arrives. Arms alternate over --rounds rounds (direct, through, through, direct, ...) so
drift and neighbours' load fall on both. Printed side by side: TTFT and ITL p50/p99, the
difference through - direct, and the gateway's CPU seconds per request (its process's
utime + stime from /proc, over the through arms).

    python -m bench.gateway_overhead
    python -m bench.gateway_overhead --requests 400 --concurrency 16 --json bench/out/gw.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench.asgi import read_body
from bench.cpu_meter import BUSY_WARNING_CORES, OtherCpuMeter
from exporters.sockets import free_port


# --- the upstream: a raw ASGI app with scripted timing (its own process) --------------------
def upstream_app(first_seconds: float, num_chunks: int, interval_seconds: float) -> Any:
    chunk = (b'data: {"id":"x","object":"chat.completion.chunk","model":"tiny","choices":'
             b'[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}\n\n')
    usage = (b'data: {"id":"x","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":'
             + str(num_chunks).encode() + b',"total_tokens":' + str(num_chunks + 8).encode()
             + b"}}\n\n")

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        await asyncio.sleep(first_seconds)
        for i in range(num_chunks):
            if i:
                await asyncio.sleep(interval_seconds)
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if b'"include_usage": true' in body or b'"include_usage":true' in body:
            await send({"type": "http.response.body", "body": usage, "more_body": True})
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n",
                    "more_body": False})

    return app


def serve_upstream(port: int, first_seconds: float, num_chunks: int, interval: float) -> None:
    import uvicorn

    from exporters.sockets import bind_socket
    sock = bind_socket("127.0.0.1", port)
    config = uvicorn.Config(upstream_app(first_seconds, num_chunks, interval),
                            log_level="warning", access_log=False, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


# --- the client ------------------------------------------------------------------------------
@dataclass
class Samples:
    ttft: list[float] = field(default_factory=list)
    itl: list[float] = field(default_factory=list)
    failed: int = 0


async def one_request(client: httpx.AsyncClient, url: str, samples: Samples) -> None:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    sent = time.perf_counter()
    arrivals: list[float] = []
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as response:
        async for data in response.aiter_raw():
            now = time.perf_counter()
            arrivals += [now] * data.count(b'"content":"tok')
        if response.status_code != 200:
            samples.failed += 1
            return
    samples.ttft.append(arrivals[0] - sent)
    samples.itl += [b - a for a, b in zip(arrivals, arrivals[1:])]


async def run_arm(url: str, num_requests: int, concurrency: int, samples: Samples) -> None:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits, trust_env=False) as client:
        queue = iter(range(num_requests))

        async def worker() -> None:
            for _ in queue:
                await one_request(client, url, samples)

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


@contextmanager
def process(args: list[str], url: str) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "INFERWATCH_GATEWAY_SALT": "bench-salt-0123456789"}
    proc = subprocess.Popen([sys.executable, *args], env=env)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/ready", timeout=1, trust_env=False)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"{args} did not start") from None
                time.sleep(0.1)
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)


# --- the report ------------------------------------------------------------------------------
def percentiles_ms(values: list[float]) -> dict[str, float]:
    array = np.asarray(values) * 1000
    return {"p50": float(np.percentile(array, 50)), "p99": float(np.percentile(array, 99))}


def report(direct: Samples, through: Samples, gateway_cpu: float, upstream_cpu: float,
           num_through: int, busy: float | None) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for name in ("ttft", "itl"):
        d, t = percentiles_ms(getattr(direct, name)), percentiles_ms(getattr(through, name))
        rows[name] = {"direct_ms": d, "through_ms": t,
                      "added_ms": {k: t[k] - d[k] for k in d}}
    return {"metrics": rows, "gateway_cpu_seconds_per_request": gateway_cpu / num_through,
            # the upstream serves both arms: its CPU per request is the yardstick (an ASGI
            # server on uvicorn sending the same chunks once)
            "upstream_cpu_seconds_per_request": upstream_cpu / (2 * num_through),
            "requests_per_arm": num_through, "failed": direct.failed + through.failed,
            "ttft_samples": len(through.ttft), "itl_samples": len(through.itl),
            "other_processes_cores": busy}


def print_report(result: dict[str, Any]) -> None:
    print("| metric | direct p50 | through p50 | added p50 | direct p99 | through p99 "
          "| added p99 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, row in result["metrics"].items():
        d, t, a = row["direct_ms"], row["through_ms"], row["added_ms"]
        print(f"| {name.upper()} ms | {d['p50']:.2f} | {t['p50']:.2f} | {a['p50']:+.2f} "
              f"| {d['p99']:.2f} | {t['p99']:.2f} | {a['p99']:+.2f} |")
    print(f"gateway CPU: {result['gateway_cpu_seconds_per_request'] * 1000:.2f} ms per request "
          f"({result['requests_per_arm']} requests through, {result['failed']} failed); the "
          f"upstream's: {result['upstream_cpu_seconds_per_request'] * 1000:.2f} ms")
    busy = result["other_processes_cores"]
    if busy is not None:
        warn = "  (busy: figures are noisy)" if busy > BUSY_WARNING_CORES else ""
        print(f"other processes kept {busy:.2f} cores busy{warn}")


def measure(args: argparse.Namespace, upstream: str, gateway: str, up_pid: int, gw_pid: int
            ) -> dict[str, Any]:
    """Warm both paths, then the alternating arms; the report of them."""
    for url in (upstream, gateway):  # connections, first-call costs
        asyncio.run(run_arm(url, args.concurrency * 2, args.concurrency, Samples()))
    direct, through, gateway_cpu = Samples(), Samples(), 0.0
    meter, started = OtherCpuMeter(), time.perf_counter()
    up_before, gw_before = cpu_seconds(up_pid), cpu_seconds(gw_pid)
    for r in range(args.rounds):
        for arm in (("direct", "through") if r % 2 == 0 else ("through", "direct")):
            if arm == "direct":
                asyncio.run(run_arm(upstream, args.requests, args.concurrency, direct))
                continue
            before = cpu_seconds(gw_pid)
            asyncio.run(run_arm(gateway, args.requests, args.concurrency, through))
            gateway_cpu += cpu_seconds(gw_pid) - before
    busy = meter.cores()
    upstream_cpu = cpu_seconds(up_pid) - up_before
    if busy is not None:  # the upstream's and the gateway's CPU are this run's, not others'
        children = upstream_cpu + cpu_seconds(gw_pid) - gw_before
        busy = max(0.0, busy - children / (time.perf_counter() - started))
    return report(direct, through, gateway_cpu, upstream_cpu, args.requests * args.rounds,
                  busy)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=200, help="per arm and round")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--rounds", type=int, default=2, help="each a direct and a through arm")
    p.add_argument("--chunks", type=int, default=16)
    p.add_argument("--first-ms", type=float, default=20.0)
    p.add_argument("--interval-ms", type=float, default=10.0)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--serve-upstream", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve_upstream is not None:
        serve_upstream(args.serve_upstream, args.first_ms / 1000, args.chunks,
                       args.interval_ms / 1000)
        return 0
    up_port, gw_port = free_port(), free_port()
    upstream, gateway = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{gw_port}"
    script = ["--chunks", str(args.chunks), "--first-ms", str(args.first_ms),
              "--interval-ms", str(args.interval_ms)]
    with process(["-m", "bench.gateway_overhead", "--serve-upstream", str(up_port), *script],
                 upstream) as up, \
            process(["-m", "monitor.cli", "--log-level", "WARNING", "gateway", "--upstream",
                     upstream, "--port", str(gw_port)], gateway) as gw:
        result = measure(args, upstream, gateway, up.pid, gw.pid)
    result["settings"] = {k: v for k, v in vars(args).items() if k != "json"}
    print_report(result)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
