"""Child processes: their output read and logged, their whole group stopped."""

import os
import re
import sys
import time
from pathlib import Path

import pytest

from monitor.stack.processes import ChildError, find_binary, start_child

# A child that starts a grandchild in its own process group, says both pids, and waits.
PARENT = """
import subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(f"ready: {grandchild.pid}", flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """Running (a zombie that nobody reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _gone_soon(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_stopping_a_child_stops_what_it_started_too(tmp_path):
    child = start_child("parent", [sys.executable, "-c", PARENT], log_path=tmp_path / "p.log")
    try:
        grandchild = int(child.wait_for_line(re.compile(r"ready: (\d+)"), 20).group(1))
        assert os.getpgid(grandchild) == child.pid != os.getpgid(0)  # a group of its own
        assert _alive(grandchild)
    finally:
        child.stop(timeout=5)
    assert not child.alive()
    assert _gone_soon(grandchild)
    assert (tmp_path / "p.log").read_text() == f"ready: {grandchild}\n"
    child.stop()  # again: nothing to do


def test_a_child_that_exits_during_its_start_is_reported_with_its_output():
    child = start_child("failing", [sys.executable, "-c", "print('bad flag'); exit(3)"])
    with pytest.raises(ChildError, match=r"failing exited during start \(status 3\):\nbad flag"):
        child.wait_for_line(re.compile("listening"), 20)


def test_a_child_that_does_not_start_in_time_is_reported():
    child = start_child("slow", [sys.executable, "-c", "print('warming up', flush=True); "
                                 "import time; time.sleep(60)"])
    try:
        with pytest.raises(ChildError, match=r"slow did not start in 0.5 s:\nwarming up"):
            child.wait_for_line(re.compile("listening"), 0.5)
    finally:
        child.stop(timeout=5)


def test_a_child_that_ignores_sigterm_is_killed():
    child = start_child("stubborn", [sys.executable, "-c",
                                     "import signal, time; signal.signal(signal.SIGTERM, "
                                     "signal.SIG_IGN); print('up', flush=True); time.sleep(60)"])
    child.wait_for_line(re.compile("up"), 20)
    began = time.monotonic()
    child.stop(timeout=0.5)
    assert not child.alive() and time.monotonic() - began < 5


def test_a_missing_program_is_a_child_error():
    with pytest.raises(ChildError, match="no-such-program"):
        start_child("ghost", ["/no/such/dir/no-such-program"])


def test_binaries_are_found_on_path_or_not_at_all():
    assert find_binary(["no-such-binary-anywhere", "sh"]) in ("/bin/sh", "/usr/bin/sh")
    assert find_binary(["no-such-binary-anywhere"]) is None
