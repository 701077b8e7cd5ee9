"""What every live engine's start helper shares: wait for its health endpoint (failing, or
skipping outside CI, with the log's tail when it dies or never answers), and stop its whole
process group."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from tests.integration import unavailable


def wait_healthy(name: str, url: str, process: subprocess.Popen[bytes], log: Path,
                 timeout: float, poll: float = 0.5, paths: Sequence[str] = ("/health",)
                 ) -> None:
    """Until every one of ``paths`` under ``url`` answers 200; ``name`` says which engine in
    the reason."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            unavailable(f"{name} exited with {process.returncode} before answering; its "
                        f"log ends:\n{log_tail(log)}")
        try:
            if all(httpx.get(url + path, timeout=2.0).status_code == 200 for path in paths):
                return
        except httpx.HTTPError:
            pass
        time.sleep(poll)
    unavailable(f"{name} did not answer {', '.join(paths)} at {url} within {timeout:g} s; its log "
                f"ends:\n{log_tail(log)}")


def stop_group(process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """SIGTERM to the process group (a server and its workers), SIGKILL after ``timeout``;
    reaped either way."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout)
        except ProcessLookupError:
            pass
    try:  # workers left behind in the group, if the server died before them
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def log_tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
