"""The reference server as a child process: `inferwatch reference-server --port 0`."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from monitor.stack.processes import Child, ChildError, start_child

LISTENING: Final = re.compile(r"listening on (http://\S+)")


def start_reference_server(extra_args: list[str], startup_timeout: float,
                           cpus: set[int] | None = None,
                           log_path: Path | None = None) -> tuple[Child, str]:
    """Start the server (on ``cpus`` only, when given); the child and its base URL once it
    listens. RuntimeError (ChildError) with its output if it exits or does not start in time."""
    cmd = [sys.executable, "-m", "monitor.cli", "--log-level", "WARNING", "reference-server",
           "--port", "0", *extra_args]
    child = start_child("reference server", cmd, log_path=log_path, cpus=cpus)
    try:
        url = child.wait_for_line(LISTENING, startup_timeout).group(1)
    except BaseException:
        child.stop()
        raise
    return child, url


@contextlib.contextmanager
def reference_server(extra_args: list[str], startup_timeout: float,
                     cpus: set[int] | None = None) -> Iterator[str]:
    """Start `inferwatch reference-server --port 0` as a child (on ``cpus`` only, when given);
    yield its base URL."""
    child, url = start_reference_server(extra_args, startup_timeout, cpus)
    try:
        yield url
    finally:
        child.stop()


__all__ = ["ChildError", "LISTENING", "reference_server", "start_reference_server"]
