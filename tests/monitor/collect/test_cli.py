"""`inferwatch collect` end to end: a real reference server, the real CLI process, a SQLite
store, and a clean stop on SIGTERM."""

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from exporters import schema
from monitor.collect.derive import derive
from monitor.store import Selector, open_store, window
from tests.reference_server.server_fixture import running_server

NUM_REQUESTS, MAX_TOKENS = 5, 8


def wait_for_first_scrape(db: Path, timeout: float = 30.0) -> None:
    """Until the collector has stored its first scrape of the target (a busy machine may
    take seconds to get there); then one interval more, so the next scrape has started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if db.exists():
            with sqlite3.connect(db) as conn:
                try:
                    if conn.execute("SELECT count(*) FROM intervals").fetchone()[0] > 0:
                        time.sleep(1.2)
                        return
                except sqlite3.OperationalError:  # tables not created yet
                    pass
        time.sleep(0.2)
    raise AssertionError(f"no scrape stored in {db} after {timeout} s")


def wait_for_line(proc: subprocess.Popen[str], text: str, timeout: float = 60) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if text in line:
            return
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"no line containing {text!r} from inferwatch collect")


@pytest.mark.slow
def test_collect_scrapes_a_live_server_into_the_store(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    with running_server() as srv:
        config = tmp_path / "inferwatch.yaml"
        config.write_text(
            f"store: {{url: 'sqlite:///{db}'}}\n"
            "targets:\n"
            f"  - {{name: ref, url: '{srv.url}/metrics', scrape_interval_seconds: 1,\n"
            "     scrape_timeout_seconds: 0.5, labels: {model: tiny}}\n")
        proc = subprocess.Popen(
            [sys.executable, "-m", "monitor.cli", "collect", "--config", str(config)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            wait_for_line(proc, "collecting 1 targets")
            wait_for_first_scrape(db)    # its readings are the base of the deltas
            start = time.time()
            for _ in range(NUM_REQUESTS):
                httpx.post(f"{srv.url}/v1/completions", timeout=30, json={
                    "model": "tiny", "prompt": "hi", "max_tokens": MAX_TOKENS,
                    "ignore_eos": True})
            time.sleep(3.0)              # at least two scrapes after the load
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, out
    assert "stopped; 0 snapshots dropped" in out
    assert "Unclosed" not in out  # the scrapes' HTTP session and connections were closed
    store = open_store(f"sqlite:///{db}")
    try:
        totals = window(store, Selector(target="ref"), start - 5, time.time())
    finally:
        store.close()
    tokens = schema.get_spec(schema.GENERATION_TOKENS).exposed_name
    assert sum(v for k, v in totals.counters.items() if k.startswith(tokens + "{")) == \
        NUM_REQUESTS * MAX_TOKENS
    d = derive(totals)
    assert d.generation_tokens_per_second > 0
