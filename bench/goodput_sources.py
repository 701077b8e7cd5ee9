"""Goodput judged three ways on the same traffic: stored events, the load generator, histograms.

The load generator (``monitor/loadgen``) sends --requests open-loop Poisson requests at --rate
through ``inferwatch gateway --store sqlite:///...`` (its own process, as users run it) to a
scripted upstream (its own process) whose every response follows the script in its prompt:
TTFT and the gap between tokens drawn per request (log-normal, seeded), some requests failing
with a 500. The targets (--ttft-ms, --tpot-ms) sit between bucket edges on purpose.

Side by side:
- the event SLI: good requests among the stored events (the gateway's verdict, and judged
  again from the stored latencies against the same targets), and the gateway's good counter;
- the load generator's own goodput count (``LatencySlo.met`` on its client-side timings):
  the same verdict as the event's on every request whose two timings fall on the same side of
  each target (paired request by request; the exit status is 1 otherwise);
- the best estimate from bucketed histograms: P(TTFT <= target) and P(TPOT <= target) read
  from the cumulative buckets with linear interpolation inside the bucket holding the target
  (histogram_quantile's assumption), times the successful requests (two histograms cannot say
  which requests met both, so independence is assumed) - from the gateway's own histograms
  (as scraped) and from vLLM's default bucket edges (the event values bucketed on them).

Client and gateway time a request at different points: the gateway adds well under a
millisecond at p50 (docs/benchmarks.md), but the client's clock runs from before its
connection and through its own parsing, and a starved gateway's accept backlog is in the
client's TTFT, not the gateway's: tens to hundreds of ms on a busy shared 2-core machine
(printed: the client's TTFT minus the upstream's script). A request that close to a target
could be judged differently by the two, so TTFTs drawn within --margin-ms of the target (gaps
within --tpot-margin-ms) are drawn again; requests the client saw within 5 ms of a target
are counted.

    python -m bench.goodput_sources
    python -m bench.goodput_sources --requests 1000 --rate 25 --json bench/out/goodput.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from bench.asgi import read_body
from bench.gateway_overhead import process
from exporters import schema
from exporters.sockets import free_port
from monitor.loadgen.metrics import LatencySlo
from monitor.loadgen.runner import Endpoint, Limits, RequestRecord, RunResult, run_load
from monitor.loadgen.workload import RequestSpec
from monitor.slo.engine_buckets import VLLM_FAMILIES
from monitor.store import open_store
from monitor.store.request_events import RequestEventRow, RequestFilter, read_request_events
from monitor.store.request_sli import GoodputCriteria, summarize_requests

_SCRIPT = re.compile(rb"ttft=([\d.]+) gap=([\d.]+) n=(\d+) fail=([01])")


def _script(prompt: str | bytes) -> tuple[float, float, int, bool]:
    """(TTFT, gap, tokens, fail) of a request's script."""
    found = _SCRIPT.search(prompt.encode() if isinstance(prompt, str) else prompt)
    if found is None:
        return 0.0, 0.0, 1, False
    return float(found[1]), float(found[2]), int(found[3]), found[4] == b"1"


# --- the upstream: each response follows the script in its prompt (its own process) ---------
def upstream_app() -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        ttft, gap, n, fail = _script(body)
        if fail:
            await send({"type": "http.response.start", "status": 500,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": b'{"error":{"message":"x"}}'})
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        start = time.perf_counter()
        for i in range(n):  # paced from the start, so a late wake-up does not add up
            await asyncio.sleep(max(start + ttft + i * gap - time.perf_counter(), 0.0))
            await send({"type": "http.response.body", "more_body": True, "body":
                        b'data: {"id":"x","object":"text_completion","model":"tiny",'
                        b'"choices":[{"index":0,"text":"tok ","finish_reason":null}]}\n\n'})
        usage = f'{{"prompt_tokens":8,"completion_tokens":{n},"total_tokens":{n + 8}}}'
        await send({"type": "http.response.body", "more_body": True,
                    "body": b'data: {"id":"x","choices":[],"usage":' + usage.encode()
                    + b"}\n\ndata: [DONE]\n\n"})
        await send({"type": "http.response.body", "body": b""})

    return app


def serve_upstream(port: int) -> None:
    import uvicorn

    from exporters.sockets import bind_socket
    config = uvicorn.Config(upstream_app(), log_level="warning", access_log=False,
                            lifespan="off")
    uvicorn.Server(config).run(sockets=[bind_socket("127.0.0.1", port)])


# --- the traffic -----------------------------------------------------------------------------
def _draw_clear(rng: np.random.Generator, args: argparse.Namespace) -> tuple[float, float]:
    """(TTFT, gap) of one request, both scaled by one slowdown (a busy engine is slow at both,
    so meeting one target and meeting the other are not independent), clear of the targets."""
    ttft_target, tpot_target = args.ttft_ms / 1000, args.tpot_ms / 1000
    margin = args.margin_ms / 1000
    while True:
        slowdown = rng.lognormal(0.0, args.slowdown_sigma)
        ttft = float(np.clip(0.7 * ttft_target * slowdown * rng.lognormal(0.0, 0.4), 0.01, 3.0))
        gap = float(np.clip(0.8 * tpot_target * slowdown * rng.lognormal(0.0, 0.2), 0.005, 0.3))
        if abs(ttft - ttft_target) > margin \
                and abs(gap - tpot_target) > args.tpot_margin_ms / 1000:
            return ttft, gap


def workload(args: argparse.Namespace) -> list[RequestSpec]:
    rng = np.random.default_rng(args.seed)
    at = np.cumsum(rng.exponential(1 / args.rate, args.requests))
    specs = []
    for arrival in at:
        ttft, gap = _draw_clear(rng, args)
        n = int(rng.integers(6, 17))
        fail = int(rng.random() < args.fail_fraction)
        specs.append(RequestSpec(float(arrival - at[0]), f"ttft={ttft:.4f} gap={gap:.4f} "
                                 f"n={n} fail={fail}", max_tokens=n))
    return specs


# --- the histogram estimate ------------------------------------------------------------------
def fraction_at_most(bounds: Sequence[float], cumulative: Sequence[float],
                     threshold: float) -> float:
    """P(value <= threshold) from cumulative bucket counts (the last bound +Inf), linear
    inside the bucket that holds the threshold, as histogram_quantile assumes."""
    total = cumulative[-1]
    if not total:
        return float("nan")
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in zip(bounds, cumulative, strict=True):
        if threshold <= bound:
            if bound == float("inf"):
                return lower_count / total
            share = (threshold - lower_bound) / (bound - lower_bound)
            return (lower_count + share * (count - lower_count)) / total
        lower_bound, lower_count = bound, count
    return 1.0


def bucketed(values: Sequence[float], edges: Sequence[float]
             ) -> tuple[list[float], list[float]]:
    bounds = [*edges, float("inf")]
    array = np.asarray(values)
    return bounds, [float(np.sum(array <= b)) for b in bounds]


def scraped_histogram(page: str, name: str) -> tuple[list[float], list[float]]:
    buckets: dict[float, float] = {}
    for family in text_string_to_metric_families(page):
        for sample in family.samples:
            if sample.name == name + "_bucket":
                bound = float(sample.labels["le"])
                buckets[bound] = buckets.get(bound, 0.0) + sample.value
    bounds = sorted(buckets)
    return bounds, [buckets[b] for b in bounds]


def scraped_counter(page: str, name: str, **labels: str) -> float:
    return sum(s.value for f in text_string_to_metric_families(page) for s in f.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


# --- client and gateway, request by request --------------------------------------------------
def pair(result: RunResult, rows: list[RequestEventRow]
         ) -> list[tuple[RequestRecord, RequestEventRow]]:
    """Each client record with its event: the nearest arrival (both on the wall clock) with
    the same output tokens (the script's n) and success, within 5 s (a starved gateway
    reads a request late: over a second in CI)."""
    free = sorted(rows, key=lambda row: row.at)
    pairs = []
    for record in sorted(result.measured, key=lambda r: r.sent_at):
        sent = result.wall_start + record.sent_at
        candidates = [row for row in free if abs(row.at - sent) < 5.0
                      and (row.outcome == "ok") == record.ok
                      and (not record.ok or row.output_tokens == record.num_output_tokens)]
        if candidates:
            match = min(candidates, key=lambda row: abs(row.at - sent))
            free.remove(match)
            pairs.append((record, match))
    return pairs


def disagreements(pairs: list[tuple[RequestRecord, RequestEventRow]], slo: LatencySlo
                  ) -> list[dict[str, Any]]:
    """Requests the client and the gateway judged differently, with both sides' timings and
    whether a target lies between them (the measurement gap explains the verdict)."""
    found = []
    for record, row in pairs:
        if slo.met(record) == row.good:
            continue
        between = any(value is not None and other is not None and target is not None
                      and min(value, other) <= target <= max(value, other)
                      for value, other, target in ((record.ttft, row.ttft_seconds, slo.ttft),
                                                   (record.tpot, row.tpot_seconds, slo.tpot)))
        found.append({"client_ttft": record.ttft, "gateway_ttft": row.ttft_seconds,
                      "client_tpot": record.tpot, "gateway_tpot": row.tpot_seconds,
                      "client_good": slo.met(record), "gateway_good": row.good,
                      "target_between": between})
    return found


# --- the run ---------------------------------------------------------------------------------
def judge(args: argparse.Namespace, result: RunResult, rows: list[RequestEventRow],
          page: str) -> dict[str, Any]:
    ttft_t, tpot_t = args.ttft_ms / 1000, args.tpot_ms / 1000
    slo = LatencySlo(ttft=ttft_t, tpot=tpot_t)
    records = result.measured
    near = sum(1 for r in records if r.ok and (
        abs((r.ttft or 0) - ttft_t) < 0.005 or abs((r.tpot or 0) - tpot_t) < 0.005))
    ok = [r for r in rows if r.outcome == "ok"]
    # How late the client saw each first token against the upstream's script (gateway: less).
    skew = [r.ttft - float(_script(r.spec.prompt)[0]) for r in records
            if r.ok and r.ttft is not None]
    exact_good = summarize_requests(rows, GoodputCriteria(ttft_t, tpot_t)).num_good
    estimates = {}
    gw_ttft = scraped_histogram(page, schema.GATEWAY_TIME_TO_FIRST_TOKEN)
    gw_tpot = scraped_histogram(page, schema.GATEWAY_TIME_PER_OUTPUT_TOKEN)
    vllm_ttft = bucketed([r.ttft_seconds for r in ok if r.ttft_seconds is not None],
                         VLLM_FAMILIES["ttft"].defaults)
    vllm_tpot = bucketed([r.tpot_seconds for r in ok if r.tpot_seconds is not None],
                         VLLM_FAMILIES["tpot"].defaults)
    # Edges at every value: the marginals exact, only the independence assumption is left.
    exact_ttft = bucketed([r.ttft_seconds for r in ok if r.ttft_seconds is not None],
                          [ttft_t])
    exact_tpot = bucketed([r.tpot_seconds for r in ok if r.tpot_seconds is not None],
                          [tpot_t])
    for name, (ttft_h, tpot_h) in {"gateway buckets": (gw_ttft, gw_tpot),
                                   "vLLM default buckets": (vllm_ttft, vllm_tpot),
                                   "a bucket edge at each target": (exact_ttft, exact_tpot),
                                   }.items():
        p_ttft = fraction_at_most(*ttft_h, ttft_t)
        p_tpot = fraction_at_most(*tpot_h, tpot_t)
        estimate = len(ok) * p_ttft * p_tpot
        estimates[name] = {"p_ttft_met": p_ttft, "p_tpot_met": p_tpot, "good": estimate,
                           "error_requests": estimate - exact_good,
                           "error_ratio_points": (estimate - exact_good) / len(rows) * 100}
    return {
        "requests": len(records), "events_stored": len(rows), "ok": len(ok),
        "client_good": sum(1 for r in records if slo.met(r)),
        "events_good_verdict": sum(1 for r in rows if r.good),
        "events_good_rejudged": exact_good,
        "gateway_good_counter": scraped_counter(page, schema.get_spec(
            schema.GATEWAY_GOOD_REQUESTS).exposed_name),
        "client_within_5ms_of_a_target": near,
        "paired": len(pairs := pair(result, rows)),
        "disagreements": disagreements(pairs, slo),
        "client_ttft_minus_script_ms": {
            "p50": float(np.percentile(skew, 50)) * 1000,
            "p99": float(np.percentile(skew, 99)) * 1000, "max": max(skew) * 1000},
        "histogram_estimates": estimates,
        "ttft_p99_seconds": {
            "events": summarize_requests(rows).latency["ttft"]["p99"],
            "client": float(np.percentile([r.ttft for r in records if r.ttft is not None], 99)),
        },
    }


def wait_stored(url: str, count: int, timeout: float = 30.0) -> list[RequestEventRow]:
    store = open_store(url)
    try:
        deadline = time.monotonic() + timeout
        while len(rows := read_request_events(store.engine, RequestFilter())) < count:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        return rows
    finally:
        store.close()


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    classes = workdir / "classes.yaml"
    classes.write_text(f"classes:\n  bench: {{ttft_ms: {args.ttft_ms}, itl_ms: {args.tpot_ms}}}\n")
    store_url = f"sqlite:///{workdir / 'events.db'}"
    up_port, gw_port = free_port(), free_port()
    upstream, gateway = f"http://127.0.0.1:{up_port}", f"http://127.0.0.1:{gw_port}"
    with process(["-m", "bench.goodput_sources", "--serve-upstream", str(up_port)], upstream), \
            process(["-m", "monitor.cli", "--log-level", "WARNING", "gateway", "--upstream",
                     upstream, "--port", str(gw_port), "--slo-classes", str(classes),
                     "--store", store_url], gateway):
        result = asyncio.run(run_load(Endpoint(gateway, "tiny", timeout_seconds=60),
                                      workload(args), Limits(num_requests=args.requests),
                                      rate=args.rate))
        rows = wait_stored(store_url, args.requests)
        page = httpx.get(gateway + "/metrics", timeout=10, trust_env=False).text
    return judge(args, result, rows, page)


def print_report(r: dict[str, Any]) -> None:
    print(f"requests {r['requests']} (ok {r['ok']}), events stored {r['events_stored']}")
    print(f"good: events (gateway verdict) {r['events_good_verdict']}, events re-judged "
          f"{r['events_good_rejudged']}, gateway counter {r['gateway_good_counter']:g}, "
          f"load generator {r['client_good']}; client within 5 ms of a target: "
          f"{r['client_within_5ms_of_a_target']}")
    for name, e in r["histogram_estimates"].items():
        print(f"histogram estimate, {name}: good {e['good']:.1f} (P(ttft met) "
              f"{e['p_ttft_met']:.4f} x P(tpot met) {e['p_tpot_met']:.4f} x ok), error "
              f"{e['error_requests']:+.1f} requests = {e['error_ratio_points']:+.2f} points")
    skew = r["client_ttft_minus_script_ms"]
    print(f"client TTFT minus the upstream's script: p50 {skew['p50']:.1f} ms, p99 "
          f"{skew['p99']:.1f} ms, max {skew['max']:.1f} ms (margin "
          f"{r['settings']['margin_ms']:g} ms)")
    unexplained = [d for d in r["disagreements"] if not d["target_between"]]
    print(f"request by request ({r['paired']} paired): {len(r['disagreements'])} judged "
          f"differently, {len(unexplained)} of them with no target between the client's and "
          f"the gateway's timing")
    for d in r["disagreements"]:
        print(f"  TTFT client {d['client_ttft'] * 1000:.1f} / gateway "
              f"{d['gateway_ttft'] * 1000:.1f} ms, TPOT client {d['client_tpot'] * 1000:.1f} / "
              f"gateway {d['gateway_tpot'] * 1000:.1f} ms: client "
              f"{'good' if d['client_good'] else 'bad'}, gateway "
              f"{'good' if d['gateway_good'] else 'bad'}")
    p99 = r["ttft_p99_seconds"]
    print(f"TTFT p99: events {p99['events'] * 1000:.1f} ms, client {p99['client'] * 1000:.1f} ms")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=600)
    p.add_argument("--rate", type=float, default=20.0, help="requests per second (Poisson)")
    p.add_argument("--ttft-ms", type=float, default=370.0)
    p.add_argument("--tpot-ms", type=float, default=60.0)
    p.add_argument("--margin-ms", type=float, default=50.0,
                   help="TTFTs drawn this close to the target are drawn again")
    p.add_argument("--tpot-margin-ms", type=float, default=10.0,
                   help="token gaps drawn this close to the TPOT target are drawn again")
    p.add_argument("--slowdown-sigma", type=float, default=0.4,
                   help="spread of the slowdown shared by a request's TTFT and gaps")
    p.add_argument("--fail-fraction", type=float, default=0.03)
    p.add_argument("--seed", type=int, default=20)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--serve-upstream", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve_upstream is not None:
        serve_upstream(args.serve_upstream)
        return 0
    with tempfile.TemporaryDirectory() as workdir:
        result = run(args, Path(workdir))
    result["settings"] = {k: v for k, v in vars(args).items() if k not in ("json",
                                                                            "serve_upstream")}
    print_report(result)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2))
    # The definitions agree when every difference is a timing that straddles a target.
    explained = all(d["target_between"] for d in result["disagreements"])
    same_events = result["events_good_verdict"] == result["events_good_rejudged"]
    return 0 if explained and same_events and result["paired"] == result["requests"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
