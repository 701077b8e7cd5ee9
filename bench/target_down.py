"""A target that stops answering -> InferwatchTargetDown active in a real Alertmanager.

    python -m bench.target_down [--for 300] [--scrape-interval 15] [--evaluation-interval 15]

A small /metrics server (an inferwatch-schema page) on a loopback port, the collector scraping
it into a SQLite store, and the monitor's alerting loop (its target-down alert only, as
``alerting.target_down`` sets it) delivering to a real Alertmanager. After a clean phase the
server's socket is closed (scrapes: connection refused), and the time is measured until the
alert is active in Alertmanager; then the server listens again on the same port, and the time
is measured until Alertmanager no longer lists the alert (resolved).

Expected: ``for`` + up to one scrape interval (the first scrape that fails) + up to one
evaluation interval (the round that sees it) + the store's flush (0.5 s here); the resolve
within a scrape and an evaluation interval. The defaults are the product's: 15 s scrapes,
15 s rounds, for 5 minutes: one run takes about six minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.stack import collecting, sqlite_store
from monitor.alerting.alertmanager import AlertmanagerClient
from monitor.alerting.book import AlertBook
from monitor.alerting.delivery import AlertDelivery
from monitor.alerting.loop import AlertingLoop
from monitor.alerting.target_down import TargetDownMonitor
from monitor.collect.config import parse_config
from monitor.collect.target_down_config import TARGET_DOWN_ALERT

TARGET = "bench-0"
PAGE = (b"# TYPE gen_ai_server_requests_total counter\n"
        b'gen_ai_server_requests_total{finish_reason="stop",model="tiny"} 1\n'
        b"# TYPE gen_ai_server_requests_running gauge\n"
        b'gen_ai_server_requests_running{model="tiny"} 0\n')


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class MetricsServer:
    """The target: serves ``PAGE`` on a fixed loopback port; ``stop`` closes the socket
    (connection refused), ``start`` listens on the same port again."""

    def __init__(self) -> None:
        self.port = 0
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _Page)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def stop(self) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass(frozen=True, slots=True)
class Result:
    fired_seconds: float     # socket closed -> alert active in Alertmanager
    resolved_seconds: float  # socket open again -> alert gone from Alertmanager's list
    expected_fire_seconds: float  # the upper bound: for + scrape + evaluation + flush


async def _until(probe: Callable[[], Awaitable[bool]], timeout: float) -> float:
    """Seconds until ``probe`` holds (polled every 0.1 s); inf after ``timeout``."""
    start = time.time()
    while time.time() - start < timeout:
        if await probe():
            return time.time() - start
        await asyncio.sleep(0.1)
    return float("inf")


async def run(*, alertmanager_url: str, workdir: Path, for_seconds: float,
              scrape_interval: float, evaluation_interval: float) -> Result:
    server = MetricsServer()
    server.start()
    config = parse_config(
        f"targets: [{{name: {TARGET}, url: '{server.url}/metrics'}}]\n"
        f"alerting: {{target_down: {{for_seconds: {for_seconds}}}}}\n", "bench")
    with sqlite_store(workdir / "target-down.db") as store:
        async with collecting(store, TARGET, server.url, scrape_interval, "bench") as stop:
            loop = AlertingLoop(None, AlertBook(store, resend_seconds=60),
                                AlertDelivery(alertmanager_url),
                                interval_seconds=evaluation_interval,
                                target_down=TargetDownMonitor(store, lambda: config))
            task = asyncio.create_task(loop.run(stop))
            am = AlertmanagerClient(alertmanager_url)

            async def firing() -> bool:
                return bool(await am.list_alerts([f"alertname={TARGET_DOWN_ALERT}",
                                                  f"target={TARGET}"]))

            async def resolved() -> bool:
                return not await firing()

            try:
                await asyncio.sleep(2 * scrape_interval)  # answering: scrapes stored
                assert not await firing()
                server.stop()
                fired = await _until(firing, for_seconds + 5 * scrape_interval + 60)
                server.start()
                back = await _until(resolved, 5 * scrape_interval + 60)
            finally:
                stop.set()
                await asyncio.gather(task, return_exceptions=True)
                await am.aclose()
    return Result(fired, back, for_seconds + scrape_interval + evaluation_interval + 0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--for", dest="for_seconds", type=float, default=300.0)
    parser.add_argument("--scrape-interval", type=float, default=15.0)
    parser.add_argument("--evaluation-interval", type=float, default=15.0)
    args = parser.parse_args()
    from tests.monitor.alertmanager_fixture import running_alertmanager

    with tempfile.TemporaryDirectory() as tmp, running_alertmanager(Path(tmp)) as am:
        result = asyncio.run(run(alertmanager_url=am.url, workdir=Path(tmp),
                                 for_seconds=args.for_seconds,
                                 scrape_interval=args.scrape_interval,
                                 evaluation_interval=args.evaluation_interval))
    print(f"for {args.for_seconds:g} s, scrape every {args.scrape_interval:g} s, evaluate "
          f"every {args.evaluation_interval:g} s")
    print(f"target down -> {TARGET_DOWN_ALERT} active in Alertmanager: "
          f"{result.fired_seconds:.1f} s (at most {result.expected_fire_seconds:.1f} s "
          f"expected; {result.fired_seconds - args.for_seconds:.1f} s past `for`)")
    print(f"target back -> alert resolved in Alertmanager: {result.resolved_seconds:.1f} s")


if __name__ == "__main__":
    main()
