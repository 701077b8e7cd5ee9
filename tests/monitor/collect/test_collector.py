"""The collector against real HTTP servers on 127.0.0.1 port 0: a real reference server under
load, and a scripted server that serves pages, resets, errors, stalls and garbage."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from exporters import schema
from exporters.exposition import parse_page
from monitor.api.convert import target_out
from monitor.api.health import MonitorMetrics, ScrapeObserver
from monitor.collect.collector import Collector, follow_config, next_slot
from monitor.collect.config import ConfigWatcher, MonitorConfig
from monitor.collect.derive import derive
from monitor.collect.snapshot import (
    HistogramDelta,
    Snapshot,
    TargetState,
    merge_snapshots,
    series_key,
)
from tests.reference_server.server_fixture import running_server

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "engines"
UP, FIRST, DOWN = TargetState.UP, TargetState.FIRST, TargetState.DOWN
T0 = 1_700_000_000.0
TOKENS = series_key("gen_ai_server_generation_tokens_total", {"model": "m"})
RUNNING = series_key(schema.REQUESTS_RUNNING, {"model": "m"})
TTFT = series_key(schema.TIME_TO_FIRST_TOKEN, {"model": "m"})


@dataclass
class Reply:
    body: bytes = b""
    status: int = 200
    delay_seconds: float = 0.0
    content_length: bool = True  # False: the body ends when the connection closes


def page(tokens: float, buckets: Sequence[tuple[str, float]] = (("0.1", 1), ("0.5", 3),
                                                                 ("+Inf", 4)),
         running: float = 3) -> Reply:
    """A page in the inferwatch schema: one counter, one gauge, one TTFT histogram."""
    lines = ["# TYPE gen_ai_server_generation_tokens counter",
             f'gen_ai_server_generation_tokens_total{{model="m"}} {tokens}',
             "# TYPE gen_ai_server_requests_running gauge",
             f'gen_ai_server_requests_running{{model="m"}} {running}',
             f"# TYPE {schema.TIME_TO_FIRST_TOKEN} histogram"]
    lines += [f'{schema.TIME_TO_FIRST_TOKEN}_bucket{{model="m",le="{le}"}} {count}'
              for le, count in buckets]
    lines += [f'{schema.TIME_TO_FIRST_TOKEN}_sum{{model="m"}} {buckets[-1][1] * 0.25}',
              f'{schema.TIME_TO_FIRST_TOKEN}_count{{model="m"}} {buckets[-1][1]}']
    return Reply(("\n".join(lines) + "\n").encode())


class ScriptedServer:
    """Answers each path with the next scripted reply (the last one repeats), and counts the
    requests in flight at once."""

    def __init__(self) -> None:
        self.scripts: dict[str, list[Reply]] = {}
        self.lock = threading.Lock()
        self.in_flight = self.max_in_flight = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the http.server API)
                reply = owner.next_reply(self.path)
                with owner.lock:
                    owner.in_flight += 1
                    owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
                time.sleep(reply.delay_seconds)
                with owner.lock:
                    owner.in_flight -= 1
                self.send_response(reply.status)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                if reply.content_length:
                    self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a scraper that gave up on a stalled reply

        self.server = Server(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def script(self, path: str, *replies: Reply) -> str:
        self.scripts[path] = list(replies)
        return self.base + path

    def next_reply(self, path: str) -> Reply:
        with self.lock:
            replies = self.scripts.get(path, [Reply(b"not found", 404)])
            return replies.pop(0) if len(replies) > 1 else replies[0]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    yield scripted
    scripted.close()


class FakeClock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_config(targets: dict[str, str], **settings: Any) -> MonitorConfig:
    return MonitorConfig.model_validate({
        "targets": [{"name": name, "url": url, **settings.pop(name, {})}
                    for name, url in targets.items()],
        **settings,
    })


def collect(config: MonitorConfig, steps: Callable[[Collector, FakeClock], Any]) -> list[Snapshot]:
    """Run ``steps`` against a collector on a fake clock; every snapshot the sink got."""
    sunk: list[Snapshot] = []
    clock = FakeClock()

    async def main() -> None:
        async with Collector(config, sunk.append, clock=clock) as collector:
            await steps(collector, clock)

    asyncio.run(main())
    return sunk


async def scrape_every_interval(collector: Collector, clock: FakeClock, times: int) -> None:
    for _ in range(times):
        await collector.scrape_once()
        clock.now += 15


def test_scripted_pages_give_first_increases_resets_and_explicit_down_states(
        server: ScriptedServer) -> None:
    big = Reply(b"# " + b"x" * 5000 + b"\n")
    url = server.script(
        "/metrics",
        page(100),
        page(150, [("0.1", 2), ("0.5", 5), ("+Inf", 7)]),
        page(20, [("0.1", 1), ("0.5", 1), ("+Inf", 1)]),  # restarted: smaller than before
        page(30, [("0.2", 2), ("0.5", 2), ("+Inf", 3)]),  # new bounds: a reset of the histogram
        Reply(b"oops", status=500),
        page(40),  # after being down: a new baseline
        Reply(b"<html>this is not a metrics page</html>\n"),
        Reply(b"# TYPE other_requests counter\nother_requests_total 5\n"),
        Reply(page(50).body, delay_seconds=1.0),  # over the 0.3 s timeout
        big,
        page(60),
        page(70),
    )
    config = make_config({"t": url}, max_body_bytes=4096,
                         t={"scrape_timeout_seconds": 0.3})
    got = collect(config, lambda c, clock: scrape_every_interval(c, clock, 12))

    assert [s.state for s in got] == [FIRST, UP, UP, UP, DOWN, FIRST, DOWN, DOWN, DOWN, DOWN,
                                      FIRST, UP]
    first, up, reset, rebinned = got[:4]
    assert (first.counters, first.histograms) == ({}, {})  # no deltas from a first scrape
    assert first.gauges[RUNNING].last == 3  # but a gauge is a reading
    assert up.counters == {TOKENS: 50}
    assert up.histograms[TTFT] == HistogramDelta((0.1, 0.5), (1, 1, 1), 0.75, 3)
    assert reset.counters == {TOKENS: 20}  # went down: the new value is all increase
    assert reset.histograms[TTFT] == HistogramDelta((0.1, 0.5), (1, 0, 0), 0.25, 1)
    assert rebinned.counters == {TOKENS: 10}
    assert rebinned.histograms[TTFT] == HistogramDelta((0.2, 0.5), (2, 0, 1), 0.75, 3)

    reasons = [s.error.split(":")[0] for s in got if s.error]
    assert reasons == ["http_status", "parse", "unknown_engine", "timeout", "too_large"]
    for down in (s for s in got if s.state is DOWN):
        assert (down.counters, down.gauges, down.histograms) == ({}, {}, {})  # never old values
    assert "HTTP 500" in (got[4].error or "")
    assert got[11].counters == {TOKENS: 10}
    # Each snapshot starts where the last attempt ended: time is tiled, gaps are explicit.
    assert (got[0].start, got[0].end) == (T0, T0)
    assert all(b.start == a.end == b.end - 15 for a, b in zip(got, got[1:]))


def test_the_detected_engine_is_shown_by_the_targets_api_through_an_outage(
        server: ScriptedServer) -> None:
    """engine: auto on a recorded vLLM page: each answering scrape says which table read it,
    and the targets API keeps the last one while the target is down."""
    live = Reply((FIXTURES / "vllm-0.32-cpu-live.prom").read_bytes())
    url = server.script("/metrics", live, live, Reply(b"oops", status=500))
    got = collect(make_config({"vllm-0": url}), lambda c, clock: scrape_every_interval(c, clock, 3))
    assert [(s.state, s.engines) for s in got] == [(FIRST, ("vllm",)), (UP, ("vllm",)),
                                                   (DOWN, ())]
    observer = ScrapeObserver(lambda _s: None, MonitorMetrics(), clock=FakeClock(T0 + 60))
    target = make_config({"vllm-0": url}).targets[0]
    for snapshot in got:
        observer(snapshot)
        out = target_out(target, observer.status("vllm-0"))
        assert (out.engine, out.detected_engines) == ("auto", ["vllm"])
    assert out.state == "down"


def test_a_body_over_the_limit_without_a_declared_length_is_cut_off(
        server: ScriptedServer) -> None:
    url = server.script("/m", Reply(b"# " + b"x" * 50_000 + b"\n", content_length=False))
    [snapshot] = collect(make_config({"t": url}, max_body_bytes=4096),
                         lambda c, clock: c.scrape_once())
    assert snapshot.state is DOWN
    assert snapshot.error == f"too_large: {url}: body over 4096 bytes"


def test_a_refused_connection_is_down_with_the_reason() -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        port = closed.server_address[1]  # bound, then closed: nothing listens there
    config = make_config({"gone": f"http://127.0.0.1:{port}/metrics"})
    [snapshot] = collect(config, lambda c, clock: c.scrape_once())
    assert snapshot.state is DOWN and (snapshot.error or "").startswith("connect: ")


def test_only_due_targets_are_scraped(server: ScriptedServer) -> None:
    config = make_config({"fast": server.script("/f", page(1)), "slow": server.script("/s",
                          page(1))}, slow={"scrape_interval_seconds": 60})

    rounds: list[list[str]] = []

    async def steps(collector: Collector, clock: FakeClock) -> None:
        for _ in range(4):  # at T0, +15, +30, +45
            rounds.append(sorted(s.target for s in await collector.scrape_once()))
            clock.now += 15

    collect(config, steps)
    assert rounds == [["fast", "slow"], ["fast"], ["fast"], ["fast"]]


def test_a_reference_server_under_load() -> None:
    """Scrapes before, during and after real requests: the increases are what the server's
    /metrics moved by, and TTFT observations are the requests that finished."""
    num_requests, max_tokens = 6, 8
    tokens_name = "gen_ai_server_generation_tokens_total"
    moved: list[float] = []
    with running_server() as srv:
        config = make_config({"ref": f"{srv.url}/metrics"})

        async def steps(collector: Collector, clock: FakeClock) -> None:
            async with httpx.AsyncClient(base_url=srv.url, timeout=60) as client:
                moved.append(await metric(client, tokens_name))
                await scrape_every_interval(collector, clock, 1)
                load = [asyncio.create_task(complete(client, max_tokens))
                        for _ in range(num_requests)]
                await asyncio.sleep(0.05)
                await scrape_every_interval(collector, clock, 1)  # while requests run
                await asyncio.gather(*load)
                await asyncio.to_thread(srv.wait_idle)
                await scrape_every_interval(collector, clock, 1)
                moved.append(await metric(client, tokens_name))

        got = collect(config, steps)

    assert [s.state for s in got] == [FIRST, UP, UP]
    window = merge_snapshots("ref", got[1:])
    tokens = series_key(tokens_name, {"model": "tiny"})
    assert window.counters[tokens] == moved[1] - moved[0] == num_requests * max_tokens
    finished = sum(v for k, v in window.counters.items()
                   if k.startswith("gen_ai_server_requests_total"))
    ttft = window.histograms[series_key(schema.TIME_TO_FIRST_TOKEN, {"model": "tiny"})]
    assert ttft.count == sum(ttft.counts) == finished == num_requests
    derived = derive(window)
    assert derived.generation_tokens_per_second == pytest.approx(48 / 30)  # two 15 s intervals
    assert 0 < derived.ttft.percentiles.p50 < derived.e2e.percentiles.p99


async def complete(client: httpx.AsyncClient, max_tokens: int) -> None:
    response = await client.post("/v1/completions", json={
        "model": "tiny", "prompt": "Hello there", "max_tokens": max_tokens, "temperature": 0,
        "ignore_eos": True})
    response.raise_for_status()


async def metric(client: httpx.AsyncClient, name: str) -> float:
    parsed = parse_page((await client.get("/metrics")).text, "reference server")
    return sum(s.value for f in parsed.families.values() for s in f.samples if s.name == name)


def test_a_config_change_adds_and_removes_targets_and_keeps_the_others_state(
        server: ScriptedServer) -> None:
    a = server.script("/a", page(10), page(20))
    b = server.script("/b", page(100), page(110), page(125), page(145))
    c = server.script("/c", page(7), page(8))
    old = make_config({"a": a, "b": b})
    new = make_config({"b": b, "c": c})
    relabeled = make_config({"b": b, "c": c}, b={"labels": {"role": "canary"}})

    async def steps(collector: Collector, clock: FakeClock) -> None:
        await scrape_every_interval(collector, clock, 2)
        collector.apply_config(new)
        await scrape_every_interval(collector, clock, 1)
        collector.apply_config(relabeled)
        await scrape_every_interval(collector, clock, 1)

    got = collect(old, steps)
    by_round = [sorted((s.target, s.state, s.counters.get(TOKENS)) for s in got[i:i + 2])
                for i in range(0, 8, 2)]
    assert by_round == [
        [("a", FIRST, None), ("b", FIRST, None)],
        [("a", UP, 10), ("b", UP, 10)],
        [("b", UP, 15), ("c", FIRST, None)],  # b kept its baseline; a is gone
        [("b", FIRST, None), ("c", UP, 1)],  # a changed target starts over
    ]


def test_the_concurrency_limit_holds(server: ScriptedServer) -> None:
    targets = {f"t{i}": server.script(f"/t{i}", Reply(page(1).body, delay_seconds=0.2))
               for i in range(8)}
    config = make_config(targets, max_concurrent_scrapes=3)
    started = time.monotonic()
    got = collect(config, lambda c, clock: c.scrape_once())
    assert [s.state for s in got] == [FIRST] * 8
    assert server.max_in_flight == 3
    assert time.monotonic() - started >= 0.6  # three rounds of 0.2 s: 3 + 3 + 2


def test_run_scrapes_on_schedule_and_follows_config_edits(
        server: ScriptedServer, tmp_path: Path) -> None:
    def write(names: Sequence[str]) -> None:
        targets = [{"name": n, "url": server.script(f"/{n}", page(1)),
                    "scrape_interval_seconds": 0.2, "scrape_timeout_seconds": 0.1}
                   for n in names]
        path.write_text(yaml.safe_dump({"targets": targets}))

    path = tmp_path / "inferwatch.yaml"
    write(["a"])
    watcher = ConfigWatcher(path)
    sunk: list[Snapshot] = []

    async def main() -> None:
        stop = asyncio.Event()
        async with Collector(watcher.config, sunk.append) as collector:
            tasks = [asyncio.create_task(collector.run(stop)),
                     asyncio.create_task(follow_config(watcher, collector, stop, 0.05))]
            await asyncio.sleep(0.7)
            write(["b"])
            await asyncio.sleep(0.7)
            stop.set()
            await asyncio.gather(*tasks)

    asyncio.run(main())
    a = [s for s in sunk if s.target == "a"]
    b = [s for s in sunk if s.target == "b"]
    assert 2 <= len(a) <= 5 and 2 <= len(b) <= 5
    assert max(s.end for s in a) < min(s.end for s in b)  # a stopped, then b started
    gaps = [later.end - earlier.end for earlier, later in zip(a, a[1:])]
    assert all(0.1 < gap < 0.3 for gap in gaps), gaps  # one interval apart


@pytest.mark.parametrize(("slot", "now", "expected"), [
    (10.0, 10.01, 25.0),  # on time: the next slot
    (10.0, 26.0, 40.0),  # overran past one slot: skip it rather than scrape twice in a row
    (10.0, 9.0, 25.0),  # early (never scrape before the slot it served)
], ids=["on_time", "overran", "early"])
def test_the_schedule_keeps_to_its_grid(slot: float, now: float, expected: float) -> None:
    assert next_slot(slot, 15.0, now) == expected


def test_each_target_has_its_own_client_and_a_removed_targets_is_closed(
        server: ScriptedServer) -> None:
    """The httpx path (PromQL targets, and scrapes when the environment sets a proxy)."""
    a = server.script("/a", page(10), page(20))
    b = server.script("/b", page(100), page(110))
    made: list[httpx.AsyncClient] = []

    def factory() -> httpx.AsyncClient:
        made.append(httpx.AsyncClient())
        return made[-1]

    async def main() -> None:
        clock = FakeClock()
        async with Collector(make_config({"a": a, "b": b}), lambda _: None,
                             http_client_factory=factory, scrape_client="httpx",
                             clock=clock) as collector:
            await collector.scrape_once()
            assert len(made) == 2  # one pool each: a shared pool is scanned on every request
            collector.apply_config(make_config({"b": b}))
            await asyncio.sleep(0)  # the removed target's client closes in the background
            clock.now += 15
            await collector.scrape_once()
            assert [client.is_closed for client in made] == [True, False]
        assert all(client.is_closed for client in made)

    asyncio.run(main())
