"""Serve an ASGI app for a test: uvicorn on a port-0 loopback socket, in a daemon thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from exporters.sockets import bind_socket


@contextmanager
def serving(app: Any, log_level: str = "warning") -> Iterator[str]:
    """Yield the base URL while ``app`` serves; stop and close the socket after."""
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(app, log_level=log_level, access_log=False))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        uv.should_exit = True
        thread.join(15)
        sock.close()
