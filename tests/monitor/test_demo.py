"""`inferwatch demo` as a newcomer runs it: the real stack in child processes, real HTTP, a real
fault, and nothing left running afterwards (integration; about two minutes in all)."""

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from monitor.stack.alertmanager import alertmanager_binary
from monitor.stack.prometheus import prometheus_binary

# The demo runs for minutes on its own clocks (scrape, evaluation, the fault's schedule).
pytestmark = pytest.mark.waits

PAGE = "FIRING   InferwatchSLOBurnRate{severity=page, slo=demo-availability, window=1h/2m}"
STATUS = re.compile(r"^\[\d\d:\d\d\] load [\d.]+ req/s \| \d+ tok/s \| batch \d+% \| "
                    r"p99 TTFT \d+ ms \| budget left: demo-availability -?\d+%, demo-ttft")


class Demo:
    """The demo as a child process, its output read line by line as it comes."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.pid_file = tmp_path / "pids"
        self.tmpdir = tmp_path / "tmp"  # the demo's work directory goes in here
        self.tmpdir.mkdir(parents=True)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "monitor.cli", "demo", "--pid-file", str(self.pid_file),
             *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "TMPDIR": str(self.tmpdir)})
        self.lines: list[str] = []
        self._new: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            self._new.put(self.lines[-1])
        self._new.put(None)

    def wait_for(self, pattern: str, timeout: float = 90.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        for line in list(self.lines):
            if match := re.search(pattern, line):
                return match
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self._new.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                break
            if match := re.search(pattern, line):
                return match
        raise AssertionError(f"no line matching {pattern!r}; output:\n{self.output}")

    def finish(self, timeout: float = 120.0) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def child_pids(self) -> list[int]:
        text = self.pid_file.read_text() if self.pid_file.exists() else ""
        return [int(line.split()[0]) for line in text.splitlines()]


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _processes_mentioning(text: str) -> list[int]:
    """Processes whose command line names ``text``: the monitor, Prometheus and Alertmanager
    name files in the demo's work directory."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _assert_nothing_left(demo: Demo) -> None:
    pids = demo.child_pids()
    assert pids, "the demo wrote no child pids"
    assert [p for p in pids if _running(p)] == []
    assert _processes_mentioning(str(demo.tmpdir)) == []
    assert list(demo.tmpdir.iterdir()) == []  # the work directory removed (no --keep-dir)


@pytest.fixture
def demo_run(tmp_path):
    demos: list[Demo] = []

    def start(*args: str) -> Demo:
        demos.append(Demo(tmp_path / str(len(demos)), *args))
        return demos[-1]

    yield start
    for demo in demos:  # a failed test must not leave the stack behind
        if demo.process.poll() is None:
            demo.process.send_signal(signal.SIGINT)
            demo.finish()


@pytest.mark.integration
@pytest.mark.slow
def test_the_demo_shows_the_stack_under_load_pages_on_the_fault_and_cleans_up(demo_run):
    demo = demo_run("--duration", "70", "--fault-at", "20", "--fault-duration", "25")
    api = demo.wait_for(r"monitor API +(http://\S+)/docs").group(1)
    report = demo.wait_for(r"(http://\S+/api/v1/slos/demo-availability/report\?format=html)")
    workdir = demo.wait_for(r"work dir +(/\S+)").group(1)
    demo.wait_for(r"reference server +http://127\.0\.0\.1:\d+")
    if prometheus_binary():
        demo.wait_for(r"Prometheus +http://127\.0\.0\.1:\d+/alerts")
    if alertmanager_binary():
        demo.wait_for(r"Alertmanager +http://127\.0\.0\.1:\d+")
    slos = httpx.get(f"{api}/api/v1/slos", timeout=10).json()["items"]
    assert {s["name"] for s in slos} == {"demo-availability", "demo-ttft"}
    page = httpx.get(report.group(1), timeout=30)
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]

    demo.wait_for(r"FAULT +injected: error_rate 0\.5 for 25 s")
    demo.wait_for(re.escape(PAGE), timeout=60)
    assert demo.finish() == 0, demo.output
    assert [line for line in demo.lines if STATUS.search(line)], demo.output
    assert re.search(r"summary after 01:1\d: \d+ requests sent, \d+ answered, [1-9]\d* failed",
                     demo.output)
    assert re.search(r"InferwatchSLOBurnRate\{severity=page, slo=demo-availability, "
                     r"window=1h/2m\}: fired at", demo.output)
    assert "all stopped, nothing left running" in demo.output
    assert workdir.startswith(str(demo.tmpdir))
    _assert_nothing_left(demo)


@pytest.mark.integration
@pytest.mark.slow
def test_ctrl_c_mid_run_stops_everything_and_exits_130(demo_run):
    demo = demo_run("--duration", "300")
    demo.wait_for(STATUS.pattern)
    demo.process.send_signal(signal.SIGINT)
    assert demo.finish(60) == 130, demo.output
    assert "all stopped, nothing left running" in demo.output
    _assert_nothing_left(demo)


@pytest.mark.integration
@pytest.mark.slow
def test_sigterm_during_the_start_stops_what_was_started(demo_run):
    demo = demo_run("--duration", "300")
    demo.wait_for(r"starting the monitor")
    demo.process.send_signal(signal.SIGTERM)
    assert demo.finish(60) == 128 + signal.SIGTERM, demo.output
    assert "reference server: stopped" in demo.output
    _assert_nothing_left(demo)


def test_reference_server_rejects_a_bad_model_with_a_clear_message():
    proc = subprocess.run(
        [sys.executable, "-m", "monitor.cli", "reference-server", "--model", "/no/such/dir",
         "--port", "0"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "'/no/such/dir' is neither a built-in model" in proc.stderr
