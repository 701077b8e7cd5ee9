"""A real reference server: uvicorn on a port-0 loopback socket, in a background thread."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from reference_server.config import EngineConfig
from reference_server.server import ReferenceServer, build_server
from tests.asgi_thread import serving

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
    with serving(built.app) as url:
        yield RunningServer(url, built)
