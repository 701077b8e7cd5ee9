"""A real reference server: uvicorn on a port-0 loopback socket, in a background thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn

from reference_server.config import EngineConfig
from reference_server.server import ReferenceServer, bind_socket, build_server

ADMIN_TOKEN = "test-admin-token"


@dataclass
class RunningServer:
    url: str
    server: ReferenceServer

    @property
    def engine(self):  # the LLMEngine inside
        return self.server.engine.engine

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Wait until the engine holds no request and no KV block."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.engine.sequences and self.engine.block_manager.num_used_blocks == 0 \
                    and self.server.engine._inbox.empty():
                return
            time.sleep(0.05)
        raise AssertionError(f"engine not idle: {len(self.engine.sequences)} requests, "
                             f"{self.engine.block_manager.num_used_blocks} blocks used")


@contextmanager
def running_server(**overrides: object) -> Iterator[RunningServer]:
    settings: dict[str, object] = {"num_kv_blocks": 512, "enable_fault_injection": True,
                                   "admin_token": ADMIN_TOKEN, **overrides}
    built = build_server(EngineConfig(**settings))  # type: ignore[arg-type]
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(built.app, log_level="warning", access_log=False))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield RunningServer(f"http://127.0.0.1:{port}", built)
    finally:
        uv.should_exit = True
        thread.join(15)
        sock.close()
