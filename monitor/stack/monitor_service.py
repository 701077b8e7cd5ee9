"""The monitor service (`inferwatch serve`) as a child process."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final

from monitor.stack.processes import Service, start_child, start_on_free_port, wait_http_ready

LISTENING: Final = re.compile(r"listening on (http://\S+)")


def listening_url(proc: subprocess.Popen[str], timeout: float = 60.0) -> str:
    """The URL a child `inferwatch serve` with piped text stdout says it listens on; raises
    RuntimeError with what it printed when it exits or does not say so in ``timeout``."""
    assert proc.stdout is not None
    deadline, seen = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        if match := LISTENING.search(line):
            return match.group(1)
    raise RuntimeError("inferwatch serve did not start:\n" + "".join(seen))


def start_monitor(config_for_port: Callable[[int], Path], *, log_path: Path,
                  timeout: float = 60.0) -> Service:
    """`inferwatch serve` on a free port with the config ``config_for_port(port)`` writes
    (the config names the service's own URL for alert links); returns once it is ready (the
    store answers and the first evaluation ran)."""

    def start(port: int) -> Service:
        config = config_for_port(port)
        child = start_child("monitor", [
            sys.executable, "-m", "monitor.cli", "--log-level", "INFO", "serve",
            "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
            log_path=log_path)
        try:
            url = child.wait_for_line(LISTENING, timeout).group(1)
            wait_http_ready(child, f"{url}/readyz", timeout)
        except BaseException:
            child.stop()
            raise
        return Service("monitor", url, child)

    return start_on_free_port(start)
