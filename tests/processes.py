"""Child processes of the integration tests (Prometheus, Alertmanager): a free port, waiting
for /-/ready, and stopping them cleanly."""

from __future__ import annotations

import random
import socket
import subprocess
import time

import httpx

from exporters.sockets import free_port

__all__ = ["free_port", "restartable_port", "stop_process", "wait_ready"]


def restartable_port(low: int = 20_000, high: int = 32_000) -> int:
    """A free port below the kernel's ephemeral range (32768 and up), for a server that is
    stopped and started again on the same port minutes later: a port-0 one may meanwhile be
    taken as the local end of any outgoing connection (seen: vLLM restarting into EADDRINUSE
    while the other test stream ran)."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {low}-{high} after 200 tries")


def wait_ready(url: str, process: subprocess.Popen[bytes] | None, timeout: float,
               what: str) -> bool:
    """True once ``url``/-/ready answers 200; False if the process exits first; raises
    naming ``what`` if neither happens within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is None or process.poll() is not None:
            return False
        try:
            if httpx.get(f"{url}/-/ready", timeout=1.0).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"{what} at {url} not ready after {timeout} s")


def stop_process(process: subprocess.Popen[bytes] | None, timeout: float = 10.0) -> None:
    """SIGTERM (so it can write its state), then SIGKILL after ``timeout``; reaped either way."""
    if process is not None and process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)
