"""A real Prometheus server for tests: the `prometheus` binary as a child process.

Scrapes the given targets every second with its storage in a temporary directory and its
API on a free loopback port. Without the binary the test is skipped, unless
INFERWATCH_REQUIRE_INTEGRATION=1 (CI installs the Debian package and sets it): then it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.integration import unavailable
from tests.processes import free_port, stop_process, wait_ready
import yaml

JOB = "llm"
_DEBIAN_PATH = "/usr/bin/prometheus"
_START_ATTEMPTS = 3  # a free port can be taken between our probe and Prometheus' bind


def prometheus_binary() -> str:
    """Path of the prometheus binary; skips (or fails, where required) the test without it."""
    path = shutil.which("prometheus") or (_DEBIAN_PATH if os.access(_DEBIAN_PATH, os.X_OK)
                                          else None)
    if path:
        return path
    reason = ("the prometheus binary is not installed (not on PATH nor at /usr/bin/prometheus;"
              " apt-get install prometheus)")
    unavailable(reason)


@dataclass
class RunningPrometheus:
    url: str
    process: subprocess.Popen[Any]
    log_path: Path

    def query(self, promql: str, at: float | None = None) -> list[dict[str, Any]]:
        """The result list of an instant query (for the test's own waiting)."""
        params = {"query": promql, **({"time": f"{at:.3f}"} if at is not None else {})}
        body = httpx.get(f"{self.url}/api/v1/query", params=params, timeout=5.0).json()
        if body["status"] != "success":
            raise AssertionError(f"{promql}: {body}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def wait_for_value(self, promql: str, expected: float, timeout: float = 15.0) -> None:
        """Wait until the latest sample of ``promql`` (one series) equals ``expected``."""
        deadline = time.monotonic() + timeout
        seen: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            seen = self.query(promql)
            if len(seen) == 1 and float(seen[0]["value"][1]) == expected:
                return
            time.sleep(0.1)
        raise AssertionError(f"{promql} never reached {expected} in {timeout} s; last: {seen}")

    def stop(self) -> None:
        """Terminate and reap the process (idempotent)."""
        stop_process(self.process)


def scrape_config(targets: Sequence[str], interval: str, jobs: Sequence[str]) -> dict[str, Any]:
    return {
        "global": {"scrape_interval": interval, "scrape_timeout": interval,
                   "evaluation_interval": interval},
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": list(targets)}]}
                           for job in jobs],
    }


@contextmanager
def running_prometheus(workdir: Path, targets: Sequence[str], scrape_interval: str = "1s",
                       jobs: Sequence[str] = (JOB,)) -> Iterator[RunningPrometheus]:
    """Prometheus scraping ``targets`` (host:port each) once per job; stopped on exit."""
    binary = prometheus_binary()
    config = workdir / "prometheus.yml"
    config.write_text(yaml.safe_dump(scrape_config(targets, scrape_interval, jobs)))
    for attempt in range(1, _START_ATTEMPTS + 1):
        prometheus = _start(binary, config, workdir / f"attempt{attempt}")
        try:
            if _wait_ready(prometheus):
                break
        except BaseException:
            prometheus.stop()
            raise
        prometheus.stop()
        log = prometheus.log_path.read_text(errors="replace")
        if "address already in use" not in log or attempt == _START_ATTEMPTS:
            raise RuntimeError(f"prometheus did not become ready; its log:\n{log[-3000:]}")
    try:
        yield prometheus
    finally:
        prometheus.stop()


def _start(binary: str, config: Path, workdir: Path) -> RunningPrometheus:
    workdir.mkdir(parents=True)
    address = f"127.0.0.1:{free_port()}"
    log_path = workdir / "prometheus.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'data'}",
             f"--web.listen-address={address}", "--log.level=warn"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    return RunningPrometheus(f"http://{address}", process, log_path)


def _wait_ready(prometheus: RunningPrometheus, timeout: float = 30.0) -> bool:
    return wait_ready(prometheus.url, prometheus.process, timeout, "prometheus")
