"""Per-tenant accounting on real traffic: the tenants' tokens and cost sum to the total.

Several tenants (``x-tenant`` header) send --requests requests, half of them streamed, at
--concurrency, through ``inferwatch gateway --store sqlite:///...`` (its own process) to the
reference server (its own process, CPU, the built-in tiny model). Each tenant has its own mix:
long prompts and short answers, short prompts and long answers, and small ones in between.

The engine's busy time is the growth of the reference server's engine step histogram's sum
(``gen_ai_server_engine_step_duration_seconds_sum``) over the run, on one device; it is split
across the stored request events by output + prefill weight x prompt tokens
(``monitor/store/request_cost.py``) and priced per device-hour, per tenant and with the
tenants beyond --max-groups folded into "other". Printed side by side: each tenant's tokens as
the clients counted them (from each response's usage) and as stored, its device-seconds and
cost, then the sums over tenants against the totals. Exits 1 unless the tokens agree exactly
(client vs stored, sum vs total) and the cost sums within 1%.

    python -m bench.tenant_accounting
    python -m bench.tenant_accounting --requests 400 --concurrency 16 --json bench/out/ta.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.gateway_overhead import process
from exporters import schema
from exporters.sockets import free_port
from monitor.store import open_store
from monitor.store.request_cost import CostAttribution, CostModel, attribute_cost
from monitor.store.request_events import RequestFilter, read_request_events

# tenant -> (share of the requests, prompt characters, max output tokens)
TENANTS: dict[str, tuple[float, tuple[int, int], tuple[int, int]]] = {
    "search": (0.35, (400, 900), (2, 8)),       # long prompts, short answers: prefill-heavy
    "chat": (0.35, (20, 80), (24, 64)),         # short prompts, long answers: decode-heavy
    "batch": (0.2, (150, 300), (16, 32)),
    "trial-1": (0.05, (30, 60), (4, 16)),
    "trial-2": (0.05, (30, 60), (4, 16)),
}
Counts = dict[str, list[int]]  # tenant -> [requests, prompt tokens, output tokens]


@contextmanager
def reference_server(port: int) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "--log-level", "WARNING",
                             "reference-server", "--port", str(port)])
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1,
                             trust_env=False).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the reference server did not start")
            time.sleep(0.2)
        yield proc
    finally:
        proc.terminate()
        proc.wait(30)


def busy_seconds(engine: str) -> float:
    """The engine step histogram's sum: seconds the engine spent in steps since it started."""
    text = httpx.get(f"{engine}/metrics", timeout=10, trust_env=False).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(schema.ENGINE_STEP_DURATION + "_sum"))


def plan(num_requests: int, seed: int) -> list[tuple[str, str, int, bool]]:
    """(tenant, prompt, max_tokens, stream) per request, tenants drawn by their shares."""
    draw = random.Random(seed)
    names = list(TENANTS)
    weights = [TENANTS[n][0] for n in names]
    out = []
    for i in range(num_requests):
        tenant = draw.choices(names, weights)[0]
        _, chars, tokens = TENANTS[tenant]
        prompt = "".join(draw.choice("abcdefghij klmnop") for _ in range(draw.randint(*chars)))
        out.append((tenant, prompt, draw.randint(*tokens), i % 2 == 0))
    return out


async def send(client: httpx.AsyncClient, url: str, tenant: str, prompt: str,
               max_tokens: int, stream: bool, counts: Counts) -> None:
    body: dict[str, Any] = {"model": "tiny", "prompt": prompt, "max_tokens": max_tokens,
                            "temperature": 0}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    usage: dict[str, int] | None = None
    async with client.stream("POST", f"{url}/v1/completions", json=body,
                             headers={"x-tenant": tenant}) as response:
        response.raise_for_status()
        if not stream:
            usage = json.loads(await response.aread())["usage"]
        async for line in response.aiter_lines():
            if line.startswith("data: {") and '"usage":{' in line.replace(" ", ""):
                usage = json.loads(line[6:])["usage"]
    if usage is None:
        raise RuntimeError(f"no usage in a {tenant} response")
    tally = counts[tenant]
    tally[0] += 1
    tally[1] += usage["prompt_tokens"]
    tally[2] += usage["completion_tokens"]


async def traffic(url: str, requests: list[tuple[str, str, int, bool]],
                  concurrency: int) -> Counts:
    counts: Counts = defaultdict(lambda: [0, 0, 0])
    queue = list(reversed(requests))
    async with httpx.AsyncClient(timeout=120, trust_env=False) as client:
        async def worker() -> None:
            while queue:
                await send(client, url, *queue.pop(), counts)
        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return dict(counts)


def stored_rows(store_url: str, start: float, expected: int) -> list[Any]:
    """The gateway's events, once its batches have all landed."""
    store = open_store(store_url)
    try:
        deadline = time.monotonic() + 30
        while True:
            rows = read_request_events(store.engine, RequestFilter(start - 1, time.time() + 1))
            if len(rows) >= expected or time.monotonic() > deadline:
                return rows
            time.sleep(0.2)
    finally:
        store.close()


def report(client: Counts, found: CostAttribution, folded: CostAttribution,
           busy: float, wall: float, args: argparse.Namespace) -> dict[str, Any]:
    groups = found.groups.values()
    sums = {"prompt_tokens": sum(g.prompt_tokens for g in groups),
            "output_tokens": sum(g.output_tokens for g in groups),
            "cost": sum(g.cost or 0.0 for g in groups)}
    folded_cost = sum(g.cost or 0.0 for g in folded.groups.values())
    total_cost = found.total.cost or 0.0
    return {
        "requests": args.requests, "concurrency": args.concurrency, "wall_seconds": wall,
        "busy_device_seconds": busy, "gpu_hour_price": args.gpu_hour_price,
        "prefill_weight": args.prefill_weight,
        "tenants": {k: {"client_prompt_tokens": client.get(k, [0, 0, 0])[1],
                        "client_output_tokens": client.get(k, [0, 0, 0])[2],
                        "stored_prompt_tokens": g.prompt_tokens,
                        "stored_output_tokens": g.output_tokens, "requests": g.num_requests,
                        "device_seconds": g.device_seconds, "cost": g.cost}
                    for k, g in found.groups.items()},
        "sum": sums, "total": {"prompt_tokens": found.total.prompt_tokens,
                               "output_tokens": found.total.output_tokens, "cost": total_cost},
        "folded": {k: g.cost for k, g in folded.groups.items()},
        "folded_cost_sum": folded_cost,
        "tokens_exact": all(
            (client.get(k, [0, 0, 0])[1], client.get(k, [0, 0, 0])[2])
            == (g.prompt_tokens, g.output_tokens) for k, g in found.groups.items())
        and sorted(client) == sorted(found.groups)
        and (sums["prompt_tokens"], sums["output_tokens"])
        == (found.total.prompt_tokens, found.total.output_tokens),
        "cost_error": max(abs(sums["cost"] - total_cost), abs(folded_cost - total_cost))
        / total_cost if total_cost else float("nan"),
    }


def print_report(result: dict[str, Any]) -> None:
    print(f"{result['requests']} requests at concurrency {result['concurrency']} in "
          f"{result['wall_seconds']:.1f} s; engine busy {result['busy_device_seconds']:.2f} "
          f"device-s at {result['gpu_hour_price']:g}/device-hour, prefill weight "
          f"{result['prefill_weight']:g}")
    print("| tenant | requests | prompt tokens (client / stored) | output tokens (client / "
          "stored) | device-s | cost |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, t in result["tenants"].items():
        print(f"| {name} | {t['requests']} | {t['client_prompt_tokens']} / "
              f"{t['stored_prompt_tokens']} | {t['client_output_tokens']} / "
              f"{t['stored_output_tokens']} | {t['device_seconds']:.3f} | {t['cost']:.6f} |")
    s, total = result["sum"], result["total"]
    print(f"| sum over tenants | | {s['prompt_tokens']} | {s['output_tokens']} | | "
          f"{s['cost']:.6f} |")
    print(f"| total | | {total['prompt_tokens']} | {total['output_tokens']} | | "
          f"{total['cost']:.6f} |")
    print(f"folded (top {len(result['folded']) - 1} + other): "
          + ", ".join(f"{k} {v:.6f}" for k, v in result["folded"].items())
          + f"; sum {result['folded_cost_sum']:.6f}")
    print(f"tokens exact: {result['tokens_exact']}; cost sum vs total: "
          f"{result['cost_error']:.2e} relative")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--gpu-hour-price", type=float, default=2.5)
    p.add_argument("--prefill-weight", type=float, default=0.1)
    p.add_argument("--max-groups", type=int, default=3)
    p.add_argument("--seed", type=int, default=20)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    requests = plan(args.requests, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        store_url = f"sqlite:///{tmp}/events.db"
        open_store(store_url).migrate()
        engine_port, gw_port = free_port(), free_port()
        engine, gateway = f"http://127.0.0.1:{engine_port}", f"http://127.0.0.1:{gw_port}"
        with reference_server(engine_port), \
                process(["-m", "monitor.cli", "--log-level", "WARNING", "gateway",
                         "--upstream", engine, "--port", str(gw_port), "--store", store_url,
                         "--tenant-header", "x-tenant", "--max-tenants", "3"], gateway):
            start, busy_before = time.time(), busy_seconds(engine)
            client = asyncio.run(traffic(gateway, requests, args.concurrency))
            busy, wall = busy_seconds(engine) - busy_before, time.time() - start
            rows = stored_rows(store_url, start, len(requests))
    model = CostModel(busy, args.gpu_hour_price, args.prefill_weight)
    result = report(client, attribute_cost(rows, "tenant", model),
                    attribute_cost(rows, "tenant", model, args.max_groups), busy, wall, args)
    print_report(result)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
    return 0 if result["tokens_exact"] and result["cost_error"] <= 0.01 else 1


if __name__ == "__main__":
    raise SystemExit(main())
