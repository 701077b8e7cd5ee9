"""What `inferwatch gateway` adds: the same upstream, direct and through the gateway, in one run.

The upstream streams a fixed script (first token after --first-ms, then --chunks chunks every
--interval-ms), so what the gateway adds stands out of a flat baseline. Upstream and each
gateway run in their own process (the gateway as `python -m monitor.cli gateway`, as users run
it); the client here (aiohttp, on uvloop where installed) sends --requests requests at
--concurrency per arm and times each chunk as it arrives. Arms alternate over --rounds rounds
(direct, through, through, direct, ...) so drift and neighbours' load fall on all. Printed
side by side: TTFT and ITL p50/p99, the difference through - direct, the gateway's CPU
seconds per request (its process's utime + stime from /proc, over its arms) and so the
requests one core of it serves per second, and whether its own counters metered every request
and token the client saw.

--gateway REV,HTTP,LOOP (repeatable) puts more gateways side by side: REV is `worktree` (this
checkout) or a git revision (its monitor/ and exporters/ run from a temporary copy), HTTP and
LOOP uvicorn's --http and --loop (auto: httptools and uvloop where installed).

    python -m bench.gateway_overhead
    python -m bench.gateway_overhead --requests 400 --concurrency 16 --json bench/out/gw.json
    python -m bench.gateway_overhead --gateway dad0f65,h11,asyncio --gateway worktree,auto,auto
    python -m bench.gateway_overhead --concurrency 200 --requests 1000 --interval-ms 50
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

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
    completed: int = 0  # answered 200 and ended with [DONE]
    token_chunks: int = 0
    seconds: float = 0.0  # wall time of this arm's runs


async def one_request(session: aiohttp.ClientSession, url: str, samples: Samples) -> None:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    sent = time.perf_counter()
    arrivals: list[float] = []
    tail = b""
    try:
        async with session.post(url + "/v1/chat/completions", json=body) as response:
            async for data in response.content.iter_any():
                now = time.perf_counter()
                arrivals += [now] * data.count(b'"content":"tok')
                tail = (tail + data)[-32:]
    except (aiohttp.ClientError, TimeoutError):
        samples.failed += 1
        return
    if response.status != 200 or not arrivals or b"[DONE]" not in tail:
        samples.failed += 1
        return
    samples.completed += 1
    samples.token_chunks += len(arrivals)
    samples.ttft.append(arrivals[0] - sent)
    samples.itl += [b - a for a, b in zip(arrivals, arrivals[1:])]


async def _run_arm(url: str, num_requests: int, concurrency: int, samples: Samples) -> None:
    # aiohttp on uvloop: the lightest client at hand, so that at high concurrency the
    # client's own cost weighs little on either arm
    connector = aiohttp.TCPConnector(limit=concurrency)
    started = time.perf_counter()
    async with aiohttp.ClientSession(connector=connector,
                                     timeout=aiohttp.ClientTimeout(total=60)) as session:
        queue = iter(range(num_requests))

        async def worker() -> None:
            for _ in queue:
                await one_request(session, url, samples)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    samples.seconds += time.perf_counter() - started


def run_arm(url: str, num_requests: int, concurrency: int, samples: Samples) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(_run_arm(url, num_requests, concurrency, samples))
        return
    uvloop.run(_run_arm(url, num_requests, concurrency, samples))


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def metered(url: str) -> dict[str, float]:
    """The gateway's own count: requests by outcome, and generation tokens, so far."""
    text = httpx.get(url + "/metrics", timeout=10, trust_env=False).text
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "inferwatch_gateway_requests_total":
                key = "requests_" + sample.labels["outcome"]
            elif sample.name == "inferwatch_gateway_generation_tokens_total":
                key = "generation_tokens"
            else:
                continue
            counts[key] = counts.get(key, 0.0) + sample.value
    return counts


# The gateway under uvicorn's given --http and --loop, whatever its CLI passes: runs
# `monitor.cli` from the copy first on sys.path.
_LAUNCH = """
import runpy, sys
import uvicorn
http, loop = sys.argv.pop(1), sys.argv.pop(1)
init = uvicorn.Config.__init__
def config(self, app, **kw):
    kw["http"], kw["loop"] = http, loop
    init(self, app, **kw)
uvicorn.Config.__init__ = config
sys.argv[0] = "monitor.cli"
runpy.run_module("monitor.cli", run_name="__main__", alter_sys=True)
"""


@dataclass(frozen=True)
class GatewaySpec:
    rev: str  # "worktree" or a git revision
    http: str
    loop: str

    @classmethod
    def parse(cls, text: str) -> GatewaySpec:
        parts = text.split(",")
        if len(parts) != 3 or not all(parts):
            raise argparse.ArgumentTypeError(f"--gateway {text!r}: want REV,HTTP,LOOP")
        return cls(*parts)

    @property
    def label(self) -> str:
        return f"{self.rev},{self.http},{self.loop}"


def source_tree(rev: str, stack: ExitStack) -> str | None:
    """A copy of monitor/ and exporters/ at ``rev`` (None: this checkout)."""
    if rev == "worktree":
        return None
    root = stack.enter_context(tempfile.TemporaryDirectory(prefix="gw-bench-"))
    archive = subprocess.run(["git", "archive", rev, "monitor", "exporters"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", root], input=archive, check=True)
    return root


@contextmanager
def process(args: list[str], url: str, source: str | None = None
            ) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "INFERWATCH_GATEWAY_SALT": "bench-salt-0123456789"}
    if source is not None:
        env["PYTHONPATH"] = os.pathsep.join([source, env.get("PYTHONPATH", "")])
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


@dataclass
class GatewayArm:
    spec: GatewaySpec
    url: str
    pid: int
    samples: Samples = field(default_factory=Samples)
    cpu: float = 0.0
    counted: dict[str, float] = field(default_factory=dict)  # its /metrics, over its arms


def report(direct: Samples, arms: list[GatewayArm], upstream_cpu: float, num_requests: int,
           busy: float | None) -> dict[str, Any]:
    gateways: dict[str, Any] = {}
    for arm in arms:
        through = arm.samples
        rows: dict[str, Any] = {}
        for name in ("ttft", "itl"):
            if not getattr(through, name) or not getattr(direct, name):
                continue
            d, t = percentiles_ms(getattr(direct, name)), percentiles_ms(getattr(through, name))
            rows[name] = {"direct_ms": d, "through_ms": t,
                          "added_ms": {k: t[k] - d[k] for k in d}}
        per_request = arm.cpu / max(1, through.completed + through.failed)
        gateways[arm.spec.label] = {
            "metrics": rows, "cpu_seconds_per_request": per_request,
            "requests_per_core_second": 1 / per_request if per_request else None,
            "requests_per_second": through.completed / through.seconds if through.seconds
            else None,
            "cores_used": arm.cpu / through.seconds if through.seconds else None,
            "completed": through.completed, "failed": through.failed,
            "client_token_chunks": through.token_chunks, "metered": arm.counted,
            "all_metered": arm.counted.get("requests_ok", 0) == through.completed
            and sum(v for k, v in arm.counted.items() if k.startswith("requests_"))
            == through.completed + through.failed
            and arm.counted.get("generation_tokens", 0) == through.token_chunks,
            "ttft_samples": len(through.ttft), "itl_samples": len(through.itl)}
    return {"gateways": gateways, "direct_failed": direct.failed,
            "direct_requests_per_second": direct.completed / direct.seconds
            if direct.seconds else None,
            # the upstream serves every arm: its CPU per request is the yardstick (an ASGI
            # server on uvicorn sending the same chunks once)
            "upstream_cpu_seconds_per_request": upstream_cpu / ((1 + len(arms)) * num_requests),
            "requests_per_arm": num_requests, "other_processes_cores": busy}


def print_report(result: dict[str, Any]) -> None:
    print("| gateway | metric | direct p50 | through p50 | added p50 | direct p99 "
          "| through p99 | added p99 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, gateway in result["gateways"].items():
        for name, row in gateway["metrics"].items():
            d, t, a = row["direct_ms"], row["through_ms"], row["added_ms"]
            print(f"| {label} | {name.upper()} ms | {d['p50']:.2f} | {t['p50']:.2f} "
                  f"| {a['p50']:+.2f} | {d['p99']:.2f} | {t['p99']:.2f} | {a['p99']:+.2f} |")
    print()
    print("| gateway | CPU per request | requests per core-second | requests/s | cores used "
          "| completed | failed | metered = client |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, g in result["gateways"].items():
        print(f"| {label} | {g['cpu_seconds_per_request'] * 1000:.2f} ms "
              f"| {g['requests_per_core_second'] or 0:.0f} | {g['requests_per_second'] or 0:.1f} "
              f"| {g['cores_used'] or 0:.2f} | {g['completed']} | {g['failed']} "
              f"| {'yes' if g['all_metered'] else 'NO: ' + json.dumps(g['metered'])} |")
    print(f"direct: {result['direct_requests_per_second'] or 0:.1f} requests/s, "
          f"{result['direct_failed']} failed; the upstream's CPU: "
          f"{result['upstream_cpu_seconds_per_request'] * 1000:.2f} ms per request")
    busy = result["other_processes_cores"]
    if busy is not None:
        warn = "  (busy: figures are noisy)" if busy > BUSY_WARNING_CORES else ""
        print(f"other processes kept {busy:.2f} cores busy{warn}")


def measure(args: argparse.Namespace, upstream: str, up_pid: int, arms: list[GatewayArm]
            ) -> dict[str, Any]:
    """Warm every path, then the alternating arms; the report of them."""
    for url in (upstream, *(arm.url for arm in arms)):  # connections, first-call costs
        run_arm(url, args.concurrency * 2, min(args.concurrency, 32), Samples())
    direct = Samples()
    meter, started = OtherCpuMeter(), time.perf_counter()
    up_before = cpu_seconds(up_pid)
    all_before = up_before + sum(cpu_seconds(arm.pid) for arm in arms)
    order: list[GatewayArm | None] = [None, *arms]  # None: direct
    for r in range(args.rounds):
        for arm in (order if r % 2 == 0 else order[::-1]):
            if arm is None:
                run_arm(upstream, args.requests, args.concurrency, direct)
                continue
            before, counted = cpu_seconds(arm.pid), metered(arm.url)
            run_arm(arm.url, args.requests, args.concurrency, arm.samples)
            arm.cpu += cpu_seconds(arm.pid) - before
            time.sleep(0.2)  # each request is counted after its last byte
            for key, value in metered(arm.url).items():
                arm.counted[key] = arm.counted.get(key, 0.0) + value - counted.get(key, 0.0)
    busy = meter.cores()
    upstream_cpu = cpu_seconds(up_pid) - up_before
    if busy is not None:  # the upstream's and the gateways' CPU are this run's, not others'
        children = cpu_seconds(up_pid) + sum(cpu_seconds(arm.pid) for arm in arms) - all_before
        busy = max(0.0, busy - children / (time.perf_counter() - started))
    return report(direct, arms, upstream_cpu, args.requests * args.rounds, busy)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=200, help="per arm and round")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--rounds", type=int, default=2, help="each a direct and a through arm")
    p.add_argument("--chunks", type=int, default=16)
    p.add_argument("--first-ms", type=float, default=20.0)
    p.add_argument("--interval-ms", type=float, default=10.0)
    p.add_argument("--gateway", type=GatewaySpec.parse, action="append", default=None,
                   metavar="REV,HTTP,LOOP",
                   help="a gateway arm (repeatable); default worktree,auto,auto")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--serve-upstream", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve_upstream is not None:
        serve_upstream(args.serve_upstream, args.first_ms / 1000, args.chunks,
                       args.interval_ms / 1000)
        return 0
    specs: list[GatewaySpec] = args.gateway or [GatewaySpec("worktree", "auto", "auto")]
    up_port = free_port()
    upstream = f"http://127.0.0.1:{up_port}"
    script = ["--chunks", str(args.chunks), "--first-ms", str(args.first_ms),
              "--interval-ms", str(args.interval_ms)]
    with ExitStack() as stack:
        up = stack.enter_context(process(
            ["-m", "bench.gateway_overhead", "--serve-upstream", str(up_port), *script],
            upstream))
        arms = []
        for spec in specs:
            url = f"http://127.0.0.1:{free_port()}"
            gw = stack.enter_context(process(
                ["-c", _LAUNCH, spec.http, spec.loop, "--log-level", "WARNING", "gateway",
                 "--upstream", upstream, "--port", url.rsplit(":", 1)[1]],
                url, source_tree(spec.rev, stack)))
            arms.append(GatewayArm(spec, url, gw.pid))
        result = measure(args, upstream, up.pid, arms)
    result["settings"] = {k: v for k, v in vars(args).items() if k not in ("json", "gateway")}
    result["settings"]["gateways"] = [spec.label for spec in specs]
    print_report(result)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
