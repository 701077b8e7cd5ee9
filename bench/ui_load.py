"""Page load of the web UI's overview (/) and SLO list (/ui/slos) with 1,000 SLOs and 200
targets, beside the JSON API's own timing, in one run (issue 18).

    python -m bench.ui_load                      # --slos 1000 --targets 200 --repeat 10
    python -m bench.ui_load --quick              # 20 SLOs, 5 targets, 2 repetitions

The monitor state: a SQLite store filled with --hours hours of 15-second scrapes of --targets
targets (requests, errors, prompt and generation tokens, running/waiting/batch-size/KV-cache
gauges, TTFT, ITL and end-to-end histograms in the schema's buckets), rolled up as a running
monitor leaves it, and before them --history-days of minute rows (``bench.slo_store``) for
the first --history-targets targets: those the SLO list's sparklines select; the targets in
the config, each with its last scrape recorded; --slos SLOs of the kinds of
``bench.slo_store.store_slos`` (availability, TTFT and end-to-end latency, by target or by
pool, 30-day periods) evaluated once. The service's app (``create_app``) serves
it with uvicorn on a port-0 socket in this process. Then, --repeat times each (median and
p90):

  api      GET /api/v1/slos?limit=1000 (every page of it for more SLOs) and
           GET /api/v1/targets?limit=1000 with httpx: time to the last byte, size.
  html     GET / and GET /ui/slos with httpx: the page's server time to the last byte, size.
  browser  headless Chromium, one browser for all loads (after a warm-up navigation), driven
           over the DevTools protocol on --remote-debugging-pipe: Page.navigate, wait for the
           load event, then the page's Navigation Timing entry (responseEnd,
           domContentLoadedEventEnd, loadEventEnd, ms from the navigation's start).

Each row also has the CPU time this process spent meanwhile (the server's, all but the
client's parsing): on a shared machine the wall times grow with the load, the CPU much less.
The html and browser loads of a page alternate, so both see the same load.

The SLO list draws sparklines for its first 50 SLOs and keeps each for 5 minutes
(monitor/ui/routes.py): its first load pays for 50 period reports. That cold load is measured
apart, on fresh apps over the same state (a new app has an empty cache): --cold times with
httpx and once in the browser; the table's other rows are warm. Results are printed and
written as JSON to bench/out/ui_load.json (or --json).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import select
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import uvicorn

from bench.cpu_meter import _system_busy_seconds
from bench.slo_store import E2E_BOUNDS, E2E_SHAPE, ERROR_TYPES, TTFT_BOUNDS, TTFT_SHAPE, Fill
from bench.slo_store import _histogram as histogram
from bench.slo_store import HOUR, store_slos
from bench.slo_store import fill as fill_month
from bench.stack import sqlite_store
from exporters import schema
from exporters.sockets import bind_socket
from monitor.api import ServiceState, create_app
from monitor.api.health import MonitorMetrics, ScrapeObserver, SloCollector
from monitor.api.runs import RunManager
from monitor.service.evaluation import evaluation_loop
from monitor.collect.config import MonitorConfig, parse_config
from monitor.collect.snapshot import GaugeStats, Snapshot, TargetState, series_key
from monitor.store import Store, TargetInfo
from monitor.ui.routes import PENDING, SPARKLINE_SECONDS

SCRAPE_SECONDS = 15
MODEL = {"model": "tiny"}
ITL_BOUNDS = schema.get_spec(schema.INTER_TOKEN_LATENCY).buckets or ()
ITL_SHAPE = ((0.02, 0.5), (0.025, 0.4), (0.05, 0.099), (0.1, 0.001))
BATCH_MAX = 64.0
PAGE_LIMIT = 1000  # the API's largest page
PAGES = {"overview": "/", "slo list": "/ui/slos"}
CHROMIUM_FLAGS = (  # as tests/browser.py: nothing in the background on an offline machine
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--disable-dev-shm-usage",
    "--mute-audio", "--hide-scrollbars", "--window-size=1280,1000")
NAVIGATION_FIELDS = ("responseStart", "responseEnd", "domContentLoadedEventEnd", "loadEventEnd")


# --- the monitor's state ---------------------------------------------------------------------

def scrape(target: str, end: float, rng: np.random.Generator, load: float) -> Snapshot:
    """One 15-second scrape of a busy engine, every figure of the overview present."""
    requests = float(rng.poisson(25 * load))
    errors = rng.poisson(0.0005 * requests / len(ERROR_TYPES), len(ERROR_TYPES))
    running = min(BATCH_MAX, 40 * load * (1 + 0.1 * rng.standard_normal()))
    counters = {
        series_key(schema.get_spec(schema.REQUESTS).exposed_name,
                   {**MODEL, "finish_reason": "stop"}): requests,
        series_key(schema.get_spec(schema.PROMPT_TOKENS).exposed_name, MODEL): 500 * requests,
        series_key(schema.get_spec(schema.GENERATION_TOKENS).exposed_name, MODEL):
            200 * requests,
        **{series_key(schema.get_spec(schema.REQUEST_ERRORS).exposed_name,
                      {**MODEL, "error_type": kind}): float(n)
           for kind, n in zip(ERROR_TYPES, errors.tolist())}}
    gauges = {series_key(name, MODEL): GaugeStats.of(value) for name, value in (
        (schema.REQUESTS_RUNNING, max(running, 0.0)), (schema.REQUESTS_WAITING, 0.0),
        (schema.BATCH_SIZE_MAX, BATCH_MAX),
        (schema.KV_CACHE_USAGE_RATIO, min(1.0, 0.7 * load)))}
    histograms = {series_key(name, MODEL): histogram(bounds, shape, requests)
                  for name, bounds, shape in (
                      (schema.TIME_TO_FIRST_TOKEN, TTFT_BOUNDS, TTFT_SHAPE),
                      (schema.INTER_TOKEN_LATENCY, ITL_BOUNDS, ITL_SHAPE),
                      (schema.REQUEST_DURATION, E2E_BOUNDS, E2E_SHAPE))}
    return Snapshot(target, end - SCRAPE_SECONDS, end, TargetState.UP, counters=counters,
                    gauges=gauges, histograms=histograms)


def fill(store: Store, targets: Sequence[str], start: float, end: float) -> list[Snapshot]:
    """Scrapes of every target over (start, end], a load that differs by target; written a
    few minutes at a time. Returns each target's last scrape."""
    rng = np.random.default_rng(18)
    loads = 0.5 + 0.5 * rng.random(len(targets))
    ends = np.arange(start + SCRAPE_SECONDS, end + 1, SCRAPE_SECONDS)
    last: list[Snapshot] = []
    for chunk in np.array_split(ends, max(1, len(ends) // 20)):
        last = [scrape(t, float(e), rng, float(load))
                for e in chunk for t, load in zip(targets, loads)]
        store.write(last)
    return last[-len(targets):]


def config_yaml(targets: Sequence[str]) -> str:
    lines = ["anomaly: {enabled: false}", "targets:"]
    lines += [f"  - {{name: {t}, url: 'http://{t}/metrics', engine: vllm, "
              f"labels: {{pool: {Fill.pool(k)}}}}}" for k, t in enumerate(targets)]
    return "\n".join(lines) + "\n"


def build_state(store: Store, num_slos: int, num_targets: int, hours: float, now: float,
                history: tuple[int, int] = (0, 0)) -> ServiceState:
    """The service's state over a filled, rolled-up store, its SLOs evaluated once.
    ``history``: (targets, days) of minute rows before the scrapes, for the first targets."""
    targets = Fill(num_targets, 0, 0).targets()
    config: MonitorConfig = parse_config(config_yaml(targets), "bench.yaml")
    for t in config.targets:
        store.register_target(TargetInfo(t.name, t.url, t.engine, dict(t.labels)))
    start = math.floor((now - hours * 3600) / HOUR) * HOUR
    if min(history) > 0:  # hour and minute rows up to ``start``, rollups watermarked there
        fill_month(store, Fill(history[0], history[1] + 1, history[1], end=start))
    last = fill(store, targets, start, math.floor(now / 60) * 60)
    store.rollup(now)
    metrics = MonitorMetrics()
    scrapes = ScrapeObserver(lambda _s: None, metrics)
    for snapshot in last:
        scrapes(snapshot)
    slos = store_slos(num_slos, "30d", num_targets)
    loop = evaluation_loop(config, store, slos)
    metrics.registry.register(SloCollector(loop))
    loop.evaluate(now)
    return ServiceState(store, lambda: config, slos, metrics, scrapes,
                        RunManager(store.engine), loop, None)


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """The base URL while uvicorn serves ``app`` on a port-0 loopback socket (a thread)."""
    sock = bind_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


# --- timing over HTTP ------------------------------------------------------------------------

@dataclass
class Timed:
    """Seconds of each repetition (client side, to the last byte) and the bytes of the last."""

    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # this process's: the server, mostly
    size: int = 0


def get_all(client: httpx.Client, path: str, total: int) -> int:
    """GET every page of a listing at the API's largest page size; the bytes read."""
    size = 0
    for offset in range(0, max(total, 1), PAGE_LIMIT):
        response = client.get(path, params={"limit": PAGE_LIMIT, "offset": offset})
        response.raise_for_status()
        size += len(response.content)
    return size


def time_into(timed: Timed, fetch: Callable[[], int]) -> None:
    started, cpu = time.perf_counter(), time.process_time()
    timed.size = fetch()
    timed.seconds.append(time.perf_counter() - started)
    timed.cpu.append(time.process_time() - cpu)


def wait_drawn(client: httpx.Client, timeout: float = 600.0) -> float:
    """perf_counter() once the SLO list shows no sparkline still being drawn."""
    deadline = time.perf_counter() + timeout
    while PENDING in client.get(PAGES["slo list"]).text:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"sparklines still being drawn after {timeout:g} s")
        time.sleep(0.25)
    return time.perf_counter()


def page_fetch(client: httpx.Client, path: str) -> Callable[[], int]:
    def fetch() -> int:
        response = client.get(path)
        response.raise_for_status()
        return len(response.content)
    return fetch


# --- headless Chromium over the DevTools pipe ----------------------------------------------

def _above_4(fd: int) -> int:
    """``fd`` moved to a number above 4, so the shell's 3<&N 4>&M cannot clobber it."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class DevTools:
    """A Chromium of its own, driven over --remote-debugging-pipe (it reads commands on fd 3
    and writes answers and events on fd 4, each JSON message ending in a NUL byte), with one
    page attached in flat mode."""

    def __init__(self, executable: str, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="inferwatch-ui-load-")
        to_browser_r, self._to_browser = map(_above_4, os.pipe())
        self._from_browser, from_browser_w = map(_above_4, os.pipe())
        # bash (dash takes single-digit fds only) puts the pipes on fds 3 and 4 for Chromium.
        command = ["/bin/bash", "-c", f'exec "$0" "$@" 3<&{to_browser_r} 4>&{from_browser_w}',
                   executable, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile.name}",
                   "--remote-debugging-pipe", "about:blank"]
        with open(Path(self._profile.name) / "stderr.log", "wb") as log:
            self._process = subprocess.Popen(
                command, pass_fds=(to_browser_r, from_browser_w), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=log,
                env={**os.environ, "HOME": self._profile.name}, start_new_session=True)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.session = self._attach()

    def _stderr(self) -> str:
        path = Path(self._profile.name) / "stderr.log"
        lines = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
        return "\n".join(lines[-20:]) or "(empty)"

    def _attach(self) -> str:
        pages = [t for t in self.call("Target.getTargets")["targetInfos"] if t["type"] == "page"]
        target = (pages[0]["targetId"] if pages else
                  self.call("Target.createTarget", {"url": "about:blank"})["targetId"])
        session: str = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session=session)
        return session

    def call(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        """Send a command and return its result (events read meanwhile are dropped)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method,
                                   "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        answer = self._read_until(lambda m: m.get("id") == message["id"])
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    def _read_until(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message: dict[str, Any] = json.loads(raw)
                if wanted(message):
                    return message
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer over the DevTools pipe; stderr:\n"
                                   + self._stderr())
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe; stderr:\n"
                                   + self._stderr())
            self._buffer += chunk

    def load(self, url: str) -> dict[str, float]:
        """Navigate the page to ``url``, wait for its load event; the Navigation Timing entry's
        fields (ms since the navigation started) and the wall ms this side saw."""
        started = time.perf_counter()
        self.call("Page.navigate", {"url": url}, self.session)
        self._read_until(lambda m: m.get("method") == "Page.loadEventFired"
                         and m.get("sessionId") == self.session)
        wall = (time.perf_counter() - started) * 1000
        # loadEventEnd is set once the load event's handlers returned: after loadEventFired.
        entry: dict[str, float] = {}
        for _ in range(50):
            value = self.call("Runtime.evaluate", {
                "expression": "JSON.stringify(performance.getEntriesByType('navigation')[0])",
                "returnByValue": True}, self.session)["result"]["value"]
            entry = json.loads(value)
            if entry.get("loadEventEnd", 0) > 0:
                break
            time.sleep(0.01)
        return {**{k: float(entry[k]) for k in NAVIGATION_FIELDS},
                "transferSize": float(entry.get("transferSize", 0)), "wall": wall}

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self._process.pid, 9)
            self._process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        self._profile.cleanup()


class OthersMeter:
    """Cores other processes kept busy: system CPU time minus this process's and its waited-for
    children's (Chromium and its renderers, once the browser closed)."""

    def __init__(self) -> None:
        self._start = (_system_busy_seconds(), self._own(), time.perf_counter())

    @staticmethod
    def _own() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def cores(self) -> float | None:
        system, own, wall = _system_busy_seconds(), self._own(), time.perf_counter()
        if system is None or self._start[0] is None:
            return None
        others = (system - self._start[0]) - (own - self._start[1])
        return max(0.0, others / max(1e-9, wall - self._start[2]))


# --- the run ---------------------------------------------------------------------------------

def stats(values: Sequence[float]) -> dict[str, float]:
    return {"median": statistics.median(values),
            "p90": float(np.percentile(values, 90)), "n": len(values)}


def measure(state: ServiceState, chromium: str, repeat: int, cold: int) -> dict[str, Any]:
    """Every figure of the run: the cold SLO list first (fresh apps), then the warm rows, httpx
    and Chromium interleaved so both see the same load; the list before the overview, so its
    sparklines stay cached (SPARKLINE_SECONDS) for all of its warm loads."""
    num_slos, num_targets = len(state.slos), len(state.config().targets)
    out: dict[str, Any] = {"cold": {"httpx": [], "browser": None}}
    cold_list = Timed()
    drawn: list[float] = []
    for _ in range(cold):
        with serving(create_app(state)) as url, httpx.Client(base_url=url, timeout=300) as c:
            started = time.perf_counter()
            time_into(cold_list, page_fetch(c, PAGES["slo list"]))
            # The sparklines are drawn off the request path: wait until the list shows them
            # all (that time is reported), so no drawing runs under the warm figures.
            drawn.append(wait_drawn(c) - started)
    out["cold"]["httpx"], out["cold"]["httpx_cpu"] = cold_list.seconds, cold_list.cpu
    out["cold"]["all_drawn"] = drawn
    api = {"GET /api/v1/slos": Timed(), "GET /api/v1/targets": Timed()}
    html = {f"GET {path}": Timed() for path in PAGES.values()}
    pages: dict[str, list[dict[str, float]]] = {path: [] for path in PAGES.values()}
    browser = DevTools(chromium)
    try:
        with serving(create_app(state)) as url, httpx.Client(base_url=url, timeout=300) as c:
            browser.load(url + "/ui/static/ui.css")  # warm-up: the browser, not the cache
            out["cold"]["browser"] = browser.load(url + PAGES["slo list"])
            wait_drawn(c)
            cached_at = time.monotonic()
            fetches = {"GET /api/v1/slos": lambda: get_all(c, "/api/v1/slos", num_slos),
                       "GET /api/v1/targets": lambda: get_all(c, "/api/v1/targets", num_targets)}
            for _ in range(repeat):
                for name, fetch in fetches.items():
                    time_into(api[name], fetch)
            for path in (PAGES["slo list"], PAGES["overview"]):
                for _ in range(repeat):
                    time_into(html[f"GET {path}"], page_fetch(c, path))
                    browser.call("Page.navigate", {"url": "about:blank"}, browser.session)
                    cpu = time.process_time()
                    pages[path].append(browser.load(url + path))
                    pages[path][-1]["server_cpu"] = (time.process_time() - cpu) * 1000
                if path == PAGES["slo list"]:
                    out["slo_list_warm_seconds_after_cold"] = time.monotonic() - cached_at
    finally:
        browser.close()
    if out["slo_list_warm_seconds_after_cold"] > SPARKLINE_SECONDS:
        print("warning: some warm SLO-list loads came after the sparklines expired")
    out["api"] = {k: {**stats(v.seconds), "cpu": stats(v.cpu), "bytes": v.size}
                  for k, v in api.items()}
    out["html"] = {k: {**stats(v.seconds), "cpu": stats(v.cpu), "bytes": v.size}
                   for k, v in html.items()}
    out["browser"] = {path: {f: stats([load[f] / 1000 for load in loads])
                             for f in (*NAVIGATION_FIELDS, "wall", "server_cpu")}
                      for path, loads in pages.items()}
    return out


def table(results: dict[str, Any]) -> str:
    """Rows of seconds: median / p90 of the warm repetitions, then the cold SLO list."""
    rows = [f"{'what':<44} {'median':>9} {'p90':>9} {'CPU':>9} {'size':>10}"]

    def row(name: str, s: dict[str, Any], cpu: dict[str, float] | None = None,
            size: str = "") -> None:
        spent = f"{cpu['median'] * 1e3:>7.0f}ms" if cpu else ""
        rows.append(f"{name:<44} {s['median'] * 1e3:>7.0f}ms {s['p90'] * 1e3:>7.0f}ms "
                    f"{spent:>9} {size:>10}")

    for name, s in {**results["api"], **results["html"]}.items():
        kind = "API" if "/api/" in name else "HTML"
        row(f"{kind} {name}", s, s["cpu"], f"{s['bytes'] / 1e3:.0f} kB")
    for path, fields in results["browser"].items():
        for f in ("responseEnd", "domContentLoadedEventEnd", "loadEventEnd"):
            row(f"Chromium {path} {f}", fields[f],
                fields["server_cpu"] if f == "loadEventEnd" else None)
    cold = results["cold"]
    if cold["httpx"]:
        row("HTML GET /ui/slos, nothing cached", stats(cold["httpx"]), stats(cold["httpx_cpu"]))
    if cold.get("all_drawn"):
        row("  then until every sparkline is drawn", stats(cold["all_drawn"]), None)
    if cold["browser"]:
        b = cold["browser"]
        rows.append(f"{'Chromium /ui/slos cold: responseEnd / loadEventEnd':<44} "
                    f"{b['responseEnd']:>7.0f}ms {b['loadEventEnd']:>7.0f}ms  (one load)")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slos", type=int, default=1000)
    parser.add_argument("--targets", type=int, default=200)
    parser.add_argument("--hours", type=float, default=3.0, help="hours of 15-second scrapes")
    parser.add_argument("--history-targets", type=int, default=10,
                        help="targets with --history-days of minute rows before the scrapes "
                             "(the first 10 are those the list's 50 sparklines select)")
    parser.add_argument("--history-days", type=int, default=34,
                        help="days of minute rows (a 30-day report reads 30 + 3 days)")
    parser.add_argument("--repeat", type=int, default=10, help="warm repetitions per figure")
    parser.add_argument("--cold", type=int, default=3, help="cold SLO-list loads (httpx)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke sizes: 20 SLOs, 5 targets, 1 hour, 2 repetitions, 1 cold")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--json", type=Path, default=Path("bench/out/ui_load.json"))
    args = parser.parse_args()
    if args.quick:
        args.slos, args.targets, args.hours, args.repeat, args.cold = 20, 5, 1.0, 2, 1
        args.history_targets, args.history_days = 1, 2
    run(args)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Build, serve, measure, print the table and write the JSON; returns the results."""
    now = time.time()
    with tempfile.TemporaryDirectory() as work, \
            sqlite_store(Path(work) / "ui.db") as store:
        started = time.perf_counter()
        state = build_state(store, args.slos, args.targets, args.hours, now,
                            (args.history_targets, args.history_days))
        built = time.perf_counter() - started
        size = sum(p.stat().st_size for p in Path(work).glob("ui.db*")) / 1e6
        print(f"state: {args.targets} targets x {args.hours:g} h of 15 s scrapes (the first "
              f"{args.history_targets} with {args.history_days} days of minutes before), "
              f"{size:.0f} MB SQLite, {args.slos} SLOs evaluated ({built:.0f} s to build)",
              flush=True)
        meter = OthersMeter()
        results = measure(state, args.chromium, args.repeat, args.cold)
        others = meter.cores()
    results["settings"] = {"slos": args.slos, "targets": args.targets, "hours": args.hours,
                           "history_targets": args.history_targets,
                           "history_days": args.history_days,
                           "repeat": args.repeat, "cold": args.cold,
                           "others_cores": others, "load_average": os.getloadavg(),
                           "cpus": os.cpu_count(), "measured_at": time.strftime(
                               "%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    print(table(results))
    print(f"others (cores used by other processes): "
          f"{'n/a' if others is None else f'{others:.2f}'}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1))
    print(f"written: {args.json}")
    return results


if __name__ == "__main__":
    main()
