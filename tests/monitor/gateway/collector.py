"""A small OTLP/HTTP metrics collector for tests: a port-0 HTTP server in a thread that decodes
each POST /v1/metrics as an ``ExportMetricsServiceRequest`` (opentelemetry-proto) and keeps
it. ``hang`` makes it hold every request unanswered until the collector stops (a collector
that accepts and never answers)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

METRICS_PATH = "/v1/metrics"


@dataclass
class Collector:
    url: str = ""  # the full metrics URL, once serving
    received: list[ExportMetricsServiceRequest] = field(default_factory=list)
    content_types: list[str] = field(default_factory=list)
    hang: bool = False
    stopping: threading.Event = field(default_factory=threading.Event)

    def wait_received(self, count: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.received)} of {count} OTLP pushes received")
            time.sleep(0.02)


@contextmanager
def collecting(hang: bool = False) -> Iterator[Collector]:
    collector = Collector(hang=hang)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(collector))
    server.daemon_threads = True
    collector.url = f"http://127.0.0.1:{server.server_address[1]}{METRICS_PATH}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield collector
    finally:
        collector.stopping.set()
        server.shutdown()
        server.server_close()


def _handler(collector: Collector) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            if collector.hang:
                collector.stopping.wait(30)
                return
            if self.path != METRICS_PATH:
                self.send_error(404)
                return
            request = ExportMetricsServiceRequest()
            request.ParseFromString(body)
            collector.received.append(request)
            collector.content_types.append(self.headers.get("content-type", ""))
            answer = ExportMetricsServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


def attributes(pairs: Iterator[KeyValue] | list[KeyValue]) -> dict[str, str | int]:
    """OTLP key-values as a dict (string and int values: all the gateway sends)."""
    out: dict[str, str | int] = {}
    for pair in pairs:
        kind = pair.value.WhichOneof("value")
        out[pair.key] = pair.value.int_value if kind == "int_value" else pair.value.string_value
    return out
