"""How fast can ``inferwatch bench`` send? The load generator must not be the bottleneck.

The generator runs pinned to one core against a server that answers instantly (a raw asyncio
HTTP server on another core, precomputed SSE answers of ``--chunks`` token chunks with usage),
at rising open-loop rates (constant arrivals, so exactly rate x seconds are due). A rate is
*sustained* when at least 99% of the due requests are sent and answered OK, the last answer
comes within 0.5 s of the step's end, and the p99 scheduling lag of sends (actual minus
intended send time) stays under ``--max-lag-ms``. The highest sustained rate is bracketed and
bisected.

Side by side in the same run, the reference server's own saturation rate (tiny model, CPU) is
measured with the sweep's saturation test, so the printed headroom is generator capacity over
what a server on this machine can take.

    python -m bench.loadgen_capacity            # about 3 minutes
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing as mp
import os
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from monitor.demo import reference_server
from monitor.loadgen.metrics import LatencySlo
from monitor.loadgen.runner import Endpoint, Limits, run_load
from monitor.loadgen.sweep import SweepOptions, sweep
from monitor.loadgen.workload import Arrival, LengthDist, WorkloadSpec


def _answer(chunks: int) -> bytes:
    events = [b'data: {"id":"x","object":"text_completion","choices":[{"index":0,"text":"a",'
              b'"finish_reason":null}]}\n\n'] * chunks
    events.append(b'data: {"id":"x","object":"text_completion","choices":[],"usage":'
                  b'{"prompt_tokens":8,"completion_tokens":' + str(chunks).encode()
                  + b',"total_tokens":' + str(chunks + 8).encode() + b'}}\n\n')
    events.append(b"data: [DONE]\n\n")
    body = b"".join(events)
    return (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: "
            + str(len(body)).encode() + b"\r\n\r\n" + body)


class _Instant(asyncio.Protocol):
    """HTTP/1.1 keep-alive: for every complete request, the precomputed answer."""

    answer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport: asyncio.Transport = transport  # type: ignore[assignment]
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end].lower()
            length = 0
            marker = head.find(b"content-length:")
            if marker >= 0:
                length = int(head[marker + 15:].split(b"\r\n", 1)[0])
            end = head_end + 4 + length
            if len(self.buffer) < end:
                return
            self.buffer = self.buffer[end:]
            self.transport.write(self.answer)


def _serve(sock: socket.socket, chunks: int, core: int | None) -> None:
    if core is not None:
        os.sched_setaffinity(0, {core})
    _Instant.answer = _answer(chunks)

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_Instant, sock=sock)
        await server.serve_forever()
    asyncio.run(main())


async def _step(url: str, rate: float, seconds: float) -> dict[str, float]:
    # Constant arrivals: exactly rate x seconds requests are due, so any shortfall or lateness
    # is the generator's.
    workload = WorkloadSpec(input_len=LengthDist("fixed", 8), output_len=LengthDist("fixed", 16),
                            arrival=Arrival.CONSTANT, seed=int(rate))
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = await run_load(Endpoint(url, "instant"), workload.stream(rate),
                            Limits(duration_seconds=seconds, warmup_seconds=1.0,
                                   drain_seconds=5.0), rate=rate)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    measured = result.measured
    lag = np.array([r.sent_at - r.intended_at for r in measured]) * 1000
    ok = sum(r.ok for r in measured)
    offered = rate * seconds
    late = max(r.finished_at for r in measured) - (result.measure_start + seconds)
    return {"rate": rate, "offered": offered, "sent": len(measured), "ok": ok,
            "completed_fraction": ok / offered, "finished_late_s": late,
            "lag_p50_ms": float(np.percentile(lag, 50)),
            "lag_p99_ms": float(np.percentile(lag, 99)), "lag_max_ms": float(lag.max()),
            "client_cpu_cores": cpu / wall}


def _sustained(step: dict[str, float], max_lag_ms: float) -> bool:
    return (step["completed_fraction"] >= 0.99 and step["ok"] == step["sent"]
            and step["lag_p99_ms"] <= max_lag_ms and step["finished_late_s"] <= 0.5)


async def generator_capacity(url: str, seconds: float, max_lag_ms: float, start: float,
                             bisect: int, log: Any) -> tuple[float, list[dict[str, float]]]:
    steps: list[dict[str, float]] = []

    async def measure(rate: float) -> bool:
        step = await _step(url, rate, seconds)
        steps.append(step)
        good = _sustained(step, max_lag_ms)
        log(f"generator at {rate:7.0f} req/s: {step['completed_fraction']:.1%} completed, "
            f"send lag p50 {step['lag_p50_ms']:.2f} ms p99 {step['lag_p99_ms']:.2f} ms, "
            f"client CPU {step['client_cpu_cores']:.2f} cores -> "
            + ("sustained" if good else "NOT sustained"))
        return good

    low, high = 0.0, math.inf
    rate = start
    while math.isinf(high) and rate < 1e6:
        if await measure(rate):
            low, rate = rate, rate * 2
        else:
            high = rate
    for _ in range(bisect):
        if math.isinf(high) or high - low < 0.05 * high:
            break
        mid = (low + high) / 2
        if await measure(mid):
            low = mid
        else:
            high = mid
    return low, steps


async def reference_saturation(log: Any) -> float | None:
    options = SweepOptions(slo=LatencySlo(ttft=10.0), attainment_target=0.5, start_rate=8.0,
                           growth=1.5, max_rate=512, step_seconds=8.0, warmup_seconds=2.0,
                           refine_steps=0)
    workload = WorkloadSpec(input_len=LengthDist.parse("uniform:50-150"),
                            output_len=LengthDist("fixed", 32), chars_per_token=1.0)
    with reference_server(["--model", "tiny"], 120) as url:
        result = await sweep(Endpoint(url, "tiny"), workload, options, progress=log)
    return result.saturation_rate


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=8.0, help="measured seconds per rate")
    p.add_argument("--start-rate", type=float, default=100.0)
    p.add_argument("--max-lag-ms", type=float, default=10.0)
    p.add_argument("--chunks", type=int, default=16, help="token chunks per answer")
    p.add_argument("--bisect", type=int, default=3)
    p.add_argument("--no-reference", action="store_true",
                   help="skip the reference server's saturation rate")
    p.add_argument("--out", default="bench/out/loadgen_capacity.json")
    args = p.parse_args(argv)
    cores = sorted(os.sched_getaffinity(0))
    client_core, server_core = cores[0], (cores[1] if len(cores) > 1 else None)
    began = time.time()

    def log(text: str) -> None:
        print(f"[{time.time() - began:5.0f} s] {text}", flush=True)

    sock = socket.create_server(("127.0.0.1", 0))
    server = mp.get_context("spawn").Process(target=_serve,
                                             args=(sock, args.chunks, server_core), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        saturation = None if args.no_reference else asyncio.run(reference_saturation(log))
        os.sched_setaffinity(0, {client_core})  # the generator: one core
        capacity, steps = asyncio.run(generator_capacity(
            url, args.seconds, args.max_lag_ms, args.start_rate, args.bisect, log))
    finally:
        server.kill()
    best = max((s for s in steps if s["rate"] == capacity), key=lambda s: s["rate"],
               default=None)
    report = {"generator_max_rate": capacity, "chunks_per_answer": args.chunks,
              "max_lag_ms": args.max_lag_ms, "at_max": best, "steps": steps,
              "reference_saturation_rate": saturation,
              "headroom": capacity / saturation if saturation else None}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"generator on one core sustains {capacity:.0f} req/s ({args.chunks} chunks each, "
          f"{capacity * args.chunks:.0f} chunks/s)" + (
              f" with send lag p99 {best['lag_p99_ms']:.2f} ms" if best else ""))
    if saturation:
        print(f"reference server (tiny, CPU) saturates at {saturation:.0f} req/s: headroom "
              f"{capacity / saturation:.1f}x")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
