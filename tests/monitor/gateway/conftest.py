from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry

from monitor.gateway import Gateway, GatewayConfig, RequestEvent
from tests.asgi_thread import serving
from tests.monitor.gateway.upstream import Upstream

SALT = b"test-salt-0123456789"


@dataclass
class Through:
    """An upstream test server and a gateway in front of it, both on port-0 sockets."""

    upstream: Upstream
    upstream_url: str
    url: str
    gateway: Gateway
    registry: CollectorRegistry
    events: list[RequestEvent] = field(default_factory=list)

    def wait_events(self, count: int, timeout: float = 10.0) -> list[RequestEvent]:
        """The events once ``count`` requests have finished (recorded after the last byte)."""
        deadline = time.monotonic() + timeout
        while len(self.events) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.events)} of {count} requests recorded")
            time.sleep(0.01)
        return self.events

    def sample(self, name: str, **labels: str) -> float:
        value = self.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value


@pytest.fixture
def through() -> Iterator[Through]:
    yield from _through()


def _through(**config: object) -> Iterator[Through]:
    upstream = Upstream()
    registry = CollectorRegistry()
    with serving(upstream.app()) as upstream_url:
        gateway = Gateway(GatewayConfig(upstream_url, SALT, **config),  # type: ignore[arg-type]
                          registry)
        events: list[RequestEvent] = []
        gateway.sinks.append(events.append)
        with serving(gateway) as url:
            yield Through(upstream, upstream_url, url, gateway, registry, events)


@pytest.fixture
def through_short_timeout() -> Iterator[Through]:
    yield from _through(timeout_seconds=0.5)
