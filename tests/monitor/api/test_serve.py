"""`inferwatch serve` as a user runs it: a child process scraping a real reference server,
answering its API on a port-0 socket, stopped by SIGTERM; and its refusals of bad input."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from monitor.demo import reference_server
from monitor.loadgen import LengthDist, WorkloadSpec, send_requests
from monitor.stack.monitor_service import listening_url

TOKEN = "serve-test-token-0123456789"


def serve(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "monitor.cli", "--log-level", "WARNING",
                             "serve", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def eventually(probe: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
            if value:
                return value
        except (AssertionError, KeyError, IndexError):
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"{probe} never held in {timeout} s")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def reference() -> Iterator[str]:
    with reference_server(["--model", "tiny"], 120.0) as url:
        yield url


def write_config(tmp: Path, target_url: str) -> Path:
    (tmp / "slos.yaml").write_text(
        "slos:\n  - name: availability\n    sli: {kind: availability}\n"
        "    objective: 0.99\n    window: 1d\n")
    config = tmp / "inferwatch.yaml"
    config.write_text(
        f'store: {{url: "sqlite:///{tmp / "store.db"}"}}\nslos: [slos.yaml]\n'
        "alerting: {evaluation_interval_seconds: 1, settle_seconds: 1}\n"
        "anomaly: {enabled: false}\n"
        f"targets:\n  - {{name: ref, url: '{target_url}/metrics', scrape_interval_seconds: 1,"
        " scrape_timeout_seconds: 0.9, labels: {model: tiny}}\n")
    return config


@pytest.mark.integration
def test_serve_scrapes_evaluates_answers_and_stops_cleanly(reference: str,
                                                           tmp_path: Path) -> None:
    proc = serve("--config", str(write_config(tmp_path, reference)), "--port", "0",
                 "--token", TOKEN)
    try:
        url = listening_url(proc)
        assert url.startswith("http://127.0.0.1:")

        def target_up() -> bool:
            target = httpx.get(f"{url}/api/v1/targets/ref", timeout=10).json()
            return bool(target["state"] == "up" and target["last_scrape_seconds"] < 1)
        eventually(target_up)  # the first scrape is the baseline: load after it counts
        specs = WorkloadSpec(input_len=LengthDist("fixed", 20), output_len=LengthDist(
            "fixed", 8), chars_per_token=1.0).requests(20, 10.0)
        records = asyncio.run(send_requests(reference, "tiny", specs))
        assert all(r.error_type is None for r in records)

        def counted() -> dict[str, Any]:
            slo: dict[str, Any] = httpx.get(f"{url}/api/v1/slos/availability",
                                            timeout=10).json()
            return slo if slo["events"] == 20 else {}
        slo = eventually(counted)
        assert slo["sli"] == 1.0 and slo["state"] == "ok" and slo["budget_remaining"] == 1.0
        series = httpx.get(f"{url}/api/v1/targets/ref/series", timeout=10, params={
            "metric": "tokens_per_second", "start": time.time() - 120, "step": 5}).json()
        assert any(v for _, v in series["points"])  # the load's tokens, per second
        assert httpx.get(f"{url}/readyz", timeout=10).status_code == 200
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
        assert re.search(r'inferwatch_scrape_duration_seconds_count\{target="ref"\} [1-9]',
                         metrics)
        assert 'inferwatch_slo_budget_remaining_ratio{slo="availability"} 1.0' in metrics
        assert re.search(r"inferwatch_evaluation_duration_seconds_count [1-9]", metrics)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert "stopped; 0 snapshots dropped" in out
    assert "Unclosed" not in out  # the scrapes' HTTP session and connections were closed


@pytest.mark.parametrize(("args", "needle"), [
    (["--host", "0.0.0.0"], "refusing to listen on 0.0.0.0 without a token"),
    (["--token", "short"], "at least 16 characters"),
    (["--config", "/nonexistent/inferwatch.yaml"], "/nonexistent/inferwatch.yaml"),
    (["--store", "postgresql+psycopg://nobody:x@127.0.0.1:9/none"],
     "cannot open the store postgresql+psycopg://nobody:***@127.0.0.1:9/none"),
], ids=["open host without token", "weak token", "missing config", "unreachable store"])
def test_serve_refuses_bad_settings_naming_them(tmp_path: Path, args: list[str],
                                                needle: str) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9")
    proc = serve("--config", str(config), "--port", "0", *args)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2 and needle in out, out
