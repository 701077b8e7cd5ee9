"""The gateway's OTLP receiver for the live vLLM: started first on a port-0 socket so the shared
engine can be pointed at it (``--otlp-traces-endpoint``), and every live test's request then
also arrives as a span, turned into a request event here."""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from monitor.gateway import Gateway, GatewayConfig, RequestEvent
from tests.asgi_thread import serving
from tests.processes import free_port

SERVICE_NAME = "tiny"  # the served model name: the receiver reads the model from service.name


@dataclass
class SpanReceiver:
    url: str  # the gateway; its upstream is the engine's port
    engine_port: int  # where the engine must listen
    gateway: Gateway
    registry: CollectorRegistry
    events: list[RequestEvent] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"{self.url}/v1/traces"

    @property
    def engine_args(self) -> tuple[str, ...]:
        return ("--otlp-traces-endpoint", self.endpoint)

    @property
    def engine_env(self) -> Mapping[str, str]:
        # vLLM's exporter speaks gRPC unless told; the SDK batches spans for 5 s by default.
        return {"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
                "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_SERVICE_NAME": SERVICE_NAME}

    def wait_for(self, request_ids: Iterable[str], timeout: float = 10.0
                 ) -> dict[str, RequestEvent]:
        """The events of ``request_ids`` (vLLM's gen_ai.request.id), once all arrived."""
        wanted = set(request_ids)
        deadline = time.monotonic() + timeout
        while True:
            found = {e.request_id: e for e in list(self.events) if e.request_id in wanted}
            if len(found) == len(wanted):
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"no span within {timeout:g} s for "
                                     f"{sorted(wanted - set(found))}")
            time.sleep(0.05)


@contextmanager
def span_receiver() -> Iterator[SpanReceiver]:
    engine_port = free_port()
    registry = CollectorRegistry()
    gateway = Gateway(GatewayConfig(f"http://127.0.0.1:{engine_port}", b"live-otlp-salt"),
                      registry)
    events: list[RequestEvent] = []
    gateway.sinks.append(events.append)
    with serving(gateway) as url:
        yield SpanReceiver(url, engine_port, gateway, registry, events)
