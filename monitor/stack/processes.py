"""Child processes of the stack: each in its own session, its output teed to a log, stopped as a
whole process group so that nothing it started is left running.

A child started from the main thread also gets PR_SET_PDEATHSIG (Linux): if the parent dies
without cleaning up (SIGKILL, a crash), the kernel sends the child SIGTERM. Not from other
threads: the signal follows the thread that forked, which may end long before the process.
"""

from __future__ import annotations

import collections
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TextIO

import httpx

from exporters.sockets import free_port

_PR_SET_PDEATHSIG: Final = 1
_TAIL_LINES: Final = 200
STOP_TIMEOUT_SECONDS: Final = 10.0


class ChildError(RuntimeError):
    """A child that could not start; the message names it and quotes its last output."""


class Child:
    """A running child process; its merged stdout/stderr is read by a thread, kept as a tail
    and copied to ``log_path`` when given (a full pipe would otherwise block the child)."""

    def __init__(self, name: str, process: subprocess.Popen[str],
                 log_path: Path | None = None) -> None:
        self.name = name
        self.process = process
        self.log_path = log_path
        self._lines: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._seen = threading.Condition()
        self._closed = False
        log = log_path.open("a", encoding="utf-8") if log_path else None
        self._reader = threading.Thread(target=self._read, args=(log,), daemon=True,
                                        name=f"{name}-output")
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, num_lines: int = 30) -> str:
        with self._seen:
            return "".join(list(self._lines)[-num_lines:])

    def wait_for_line(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
        """The first output line (so far or to come) matching ``pattern``; ChildError if the
        child exits or ``timeout`` passes first."""
        deadline = time.monotonic() + timeout
        with self._seen:
            while not self._closed:
                for line in self._lines:
                    if match := pattern.search(line):
                        return match
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChildError(f"{self.name} did not start in {timeout:g} s:\n"
                                     f"{self.tail()}")
                self._seen.wait(min(left, 0.5))
        for line in list(self._lines):  # its last words may have been what we wait for
            if match := pattern.search(line):
                return match
        raise ChildError(f"{self.name} exited during start (status {self._exit_status()}):\n"
                         f"{self.tail()}")

    def _exit_status(self) -> int | None:
        try:
            return self.process.wait(5.0)  # its output ended: it is exiting
        except subprocess.TimeoutExpired:
            return None

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> None:
        """SIGTERM to the whole group (so it can write its state), SIGKILL after ``timeout``,
        then SIGKILL to whatever is left in the group; idempotent."""
        if self.process.poll() is None:
            _signal_group(self.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.pid, signal.SIGKILL)
                self.process.wait()
        _signal_group(self.pid, signal.SIGKILL)  # stragglers the leader left behind
        self._reader.join(2.0)

    def _read(self, log: TextIO | None) -> None:
        assert self.process.stdout is not None
        try:
            for line in self.process.stdout:
                if log is not None:
                    log.write(line)
                    log.flush()
                with self._seen:
                    self._lines.append(line)
                    self._seen.notify_all()
        finally:
            if log is not None:
                log.close()
            with self._seen:
                self._closed = True
                self._seen.notify_all()


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone already


def start_child(name: str, argv: Sequence[str], *, log_path: Path | None = None,
                cpus: set[int] | None = None, env: dict[str, str] | None = None) -> Child:
    """Start ``argv`` in a new session (its own process group, out of reach of the terminal's
    Ctrl-C, so the parent decides the order of shutdown); on ``cpus`` only when given."""
    try:
        process = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1,
            start_new_session=True, env=env, preexec_fn=_preexec(cpus))
    except OSError as exc:
        raise ChildError(f"{name}: cannot run {argv[0]}: {exc}") from None
    return Child(name, process, log_path)


def _preexec(cpus: set[int] | None) -> Callable[[], None] | None:
    on_main_thread = threading.current_thread() is threading.main_thread()
    deathsig = sys.platform.startswith("linux") and on_main_thread
    if not deathsig and not cpus:
        return None
    libc = ctypes.CDLL(None, use_errno=True) if deathsig else None
    parent, sigterm = os.getpid(), int(signal.SIGTERM)

    def setup() -> None:  # runs in the child between fork and exec: syscalls only
        if libc is not None:
            libc.prctl(_PR_SET_PDEATHSIG, sigterm)
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(1)
        if cpus:
            os.sched_setaffinity(0, cpus)

    return setup


def wait_http_ready(child: Child, url: str, timeout: float) -> None:
    """Wait until ``url`` answers 200; ChildError naming the child if it exits or the time
    runs out first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not child.alive():
            time.sleep(0.2)  # let the reader catch the last lines
            raise ChildError(f"{child.name} exited during start (status "
                             f"{child.process.poll()}):\n{child.tail()}")
        try:
            if httpx.get(url, timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise ChildError(f"{child.name}: {url} not ready after {timeout:g} s:\n{child.tail()}")


def address_in_use(error: ChildError) -> bool:
    """Whether a start failed because another process took the port first."""
    return "address already in use" in str(error).lower()


@dataclass(frozen=True)
class Service:
    """A child that serves HTTP at ``url``."""

    name: str
    url: str
    child: Child

    def stop(self) -> None:
        self.child.stop()


def find_binary(names: Sequence[str]) -> str | None:
    """The first of ``names`` on PATH or in /usr/bin (Debian's packages), else None."""
    for name in names:
        path = shutil.which(name) or shutil.which(name, path="/usr/bin:/usr/local/bin")
        if path:
            return path
    return None


def start_on_free_port(start: Callable[[int], Service], attempts: int = 3) -> Service:
    """``start(port)`` on a free port, again on another when the port was taken in between."""
    for attempt in range(1, attempts + 1):
        try:
            return start(free_port())
        except ChildError as exc:
            if not address_in_use(exc) or attempt == attempts:
                raise
    raise AssertionError("unreachable")


def start_http_service(name: str, argv: Callable[[str, int], Sequence[str]], *,
                       log_path: Path, timeout: float, ready_path: str = "/-/ready",
                       port: int | None = None) -> Service:
    """A child serving HTTP on a free loopback port (or ``port``): ``argv(url, port)`` starts
    it; returns once ``ready_path`` answers (the child is stopped if it never does)."""
    def start(port: int) -> Service:
        url = f"http://127.0.0.1:{port}"
        child = start_child(name, argv(url, port), log_path=log_path)
        try:
            wait_http_ready(child, f"{url}{ready_path}", timeout)
        except BaseException:
            child.stop()
            raise
        return Service(name, url, child)

    return start(port) if port is not None else start_on_free_port(start)
