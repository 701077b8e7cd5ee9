"""`inferwatch collect` on PostgreSQL is a replica in the same election as `inferwatch serve`:
of two collect processes on one store one scrapes, the other stands by, and it takes over
within a poll when the active is killed with SIGKILL."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.http_thread import serving_handler
from tests.monitor.store.databases import Database

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PAGE = (Path(__file__).parents[2] / "fixtures" / "engines" / "vllm-0.32-cpu-live.prom"
        ).read_bytes()
SCRAPE_SECONDS = 0.5
POLL_SECONDS = 0.5


class _Page(BaseHTTPRequestHandler):
    scrapes: list[float] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        type(self).scrapes.append(time.monotonic())
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args: object) -> None:
        pass


class _Collect:
    """One `inferwatch collect` process, its output lines read into a queue."""

    def __init__(self, config: Path, name: str) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "monitor.cli", "collect", "--config", str(config)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for(self, text: str, timeout: float) -> float:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            try:
                line = self.lines.get(timeout=0.05)
            except queue.Empty:
                continue
            self.seen.append(line)
            if text in line:
                return time.monotonic() - started
        raise AssertionError(f"{self.name}: no line with {text!r} in {timeout} s; "
                             f"saw {''.join(self.seen)[-2000:]}")

    def said(self, text: str) -> bool:
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        return any(text in line for line in self.seen)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def page() -> Iterator[str]:
    _Page.scrapes = []
    with serving_handler(_Page) as url:
        yield url


def _scrapes_within(seconds: float) -> int:
    started = time.monotonic()
    time.sleep(seconds)
    return sum(1 for t in _Page.scrapes if t >= started)


def test_two_collect_processes_scrape_once_and_the_standby_takes_over(
        postgres: Database, page: str, tmp_path: Path) -> None:
    def config(replica: str) -> Path:
        path = tmp_path / f"{replica}.yaml"
        path.write_text(
            f"store: {{url: '{postgres.url}'}}\n"
            f"ha: {{poll_seconds: {POLL_SECONDS}, replica_id: {replica}}}\n"
            "targets:\n"
            f"  - {{name: engine, url: '{page}/metrics', engine: vllm,\n"
            f"     scrape_interval_seconds: {SCRAPE_SECONDS}, scrape_timeout_seconds: 0.4}}\n")
        return path

    suffix = postgres.name[-6:]
    first = _Collect(config(f"first-{suffix}"), f"first-{suffix}")
    second: _Collect | None = None
    try:
        first.wait_for(f"replica first-{suffix} is now active", 60)
        second = _Collect(config(f"second-{suffix}"), f"second-{suffix}")
        second.wait_for("collecting 1 targets", 60)
        # One scraper, not two: about 1 / SCRAPE_SECONDS a second.
        window = 4.0
        scrapes = _scrapes_within(window)
        assert scrapes <= 1.5 * window / SCRAPE_SECONDS, scrapes
        assert not second.said("is now active")

        first.proc.kill()  # SIGKILL: its lock session ends with it
        took = second.wait_for(f"replica second-{suffix} is now active", 30)
        assert took <= POLL_SECONDS + 3.0, took  # a poll, plus a loaded machine's slack
        scrapes = _scrapes_within(2.0)
        assert scrapes >= 2, "the new active does not scrape"
    finally:
        first.stop()
        if second is not None:
            second.stop()
