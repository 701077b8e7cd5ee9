"""Headless Chromium for tests: the DOM after a page's scripts ran, or a screenshot.

Each call starts a fresh browser with its own temporary profile and nothing it may do in the
background (updates, sync, field trials): on a machine without network those connections are
refused and can stall or fail the run. Without Chromium the test skips (or fails under
INFERWATCH_REQUIRE_INTEGRATION=1, see ``tests.integration``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from tests.integration import unavailable

DEFAULT_TIMEOUT_SECONDS = 30.0
# Virtual time the page may use before the DOM is dumped: load events and scripts run in it.
VIRTUAL_TIME_BUDGET_MS = 5000
_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "/usr/bin/chromium")
_QUIET_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--disable-dev-shm-usage",
    "--mute-audio", "--hide-scrollbars",
)


class BrowserError(RuntimeError):
    """Chromium failed, timed out or wrote nothing; the message holds its stderr."""


def chromium() -> str:
    """The Chromium executable; skips the test (or fails, in CI) when there is none."""
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    unavailable("headless-browser tests need Chromium (apt-get install chromium)")


def dump_dom(url: str, *, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> str:
    """The serialized DOM of ``url`` once its load event and scripts have run."""
    return _run([f"--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}", "--dump-dom", url],
                timeout).stdout


def console_messages(url: str, *, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> list[str]:
    """What the page wrote to its console (logs, errors, uncaught exceptions, failed loads)
    while it loaded and its scripts ran: Chromium logs each as a ``CONSOLE`` line on stderr."""
    result = _run(["--enable-logging=stderr", "--v=0",
                   f"--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}", "--dump-dom", url], timeout)
    return [line for line in result.stderr.splitlines() if ":CONSOLE" in line]


def screenshot(url: str, path: Path, *, width: int = 1280, height: int = 2000,
               timeout: float = DEFAULT_TIMEOUT_SECONDS) -> Path:
    """A PNG of the top ``width`` x ``height`` pixels of ``url``, written to ``path``."""
    path = path.resolve()
    path.unlink(missing_ok=True)
    result = _run([f"--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}",
                   f"--screenshot={path}", f"--window-size={width},{height}", url], timeout)
    if not path.is_file() or path.stat().st_size == 0:
        raise BrowserError(f"Chromium wrote no screenshot of {url} to {path}; stderr:\n"
                           f"{_tail(result.stderr)}")
    return path


def _run(arguments: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    executable = chromium()
    with tempfile.TemporaryDirectory(prefix="inferwatch-chromium-") as profile:
        command = [executable, *_QUIET_FLAGS, f"--user-data-dir={profile}", *arguments]
        # Its own HOME too: Chromium writes caches and crash reports there.
        env = {**os.environ, "HOME": profile}
        # A session of its own, so a timeout ends its renderer and GPU processes too.
        with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env, start_new_session=True) as process:
            try:
                stdout, stderr = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                _, stderr = process.communicate()
                raise BrowserError(f"Chromium did not finish {arguments[-1]} within "
                                   f"{timeout:g} s; stderr:\n{_tail(stderr)}") from None
    if process.returncode != 0:
        raise BrowserError(f"Chromium exited with {process.returncode} on {arguments[-1]}; "
                           f"stderr:\n{_tail(stderr)}")
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:]) or "(empty)"
