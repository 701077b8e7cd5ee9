"""``POST /v1/traces`` on the gateway: an OTLP/HTTP traces receiver (protobuf or JSON, gzip
or not). Each request span becomes a ``RequestEvent`` handed to the gateway's ``finish``
(judged, counted on /metrics, stored), exactly as a proxied request's.

A payload that cannot be read is refused whole, with a reason in a JSON body: 400 (not
protobuf/JSON/gzip), 413 (over ``max_bytes``), 415 (another content type or encoding), and
counted on ``inferwatch_gateway_otlp_rejected_total{reason}``; nothing it carried is taken,
and nothing else is lost. A readable payload is answered 200; request spans it carried that
lack usable latencies are named in the response's ``partial_success`` (as OTLP says) and
counted as ``incomplete`` on ``inferwatch_gateway_otlp_spans_total{result}``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Final

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest, ExportTraceServiceResponse)
from prometheus_client import CollectorRegistry, Counter
from starlette.types import Receive, Scope, Send

from monitor.gateway.events import RequestEvent
from monitor.gateway.judge import SloClasses
from monitor.gateway.otlp import JSON, PROTOBUF, REJECT_REASONS, OtlpRejected, decode, \
    request_events

log = logging.getLogger(__name__)

TRACES_PATH: Final = "/v1/traces"
MAX_BODY_BYTES: Final = 16 * 1024 * 1024
_OFF_LOOP_BYTES: Final = 256 * 1024  # larger payloads are decoded in a worker thread
SPAN_RESULTS: Final = ("event", "other", "incomplete")


class OtlpReceiver:
    """The receiver; ``finish`` takes each event (the gateway's judge-count-store step)."""

    def __init__(self, registry: CollectorRegistry, classes: SloClasses,
                 finish: Callable[[RequestEvent], None], max_bytes: int = MAX_BODY_BYTES
                 ) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be >= 1, got {max_bytes}")
        self.classes = classes
        self.finish = finish
        self.max_bytes = max_bytes
        self.rejected = Counter(
            "inferwatch_gateway_otlp_rejected", "OTLP trace payloads refused whole, by reason",
            ["reason"], registry=registry)
        self.spans = Counter(
            "inferwatch_gateway_otlp_spans",
            "OTLP spans received: event (a request, now an event), other (not a request), "
            "incomplete (a request span without usable latencies)", ["result"],
            registry=registry)
        for reason in REJECT_REASONS:
            self.rejected.labels(reason)
        for result in SPAN_RESULTS:
            self.spans.labels(result)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await _reply(send, 405, _error("method", f"{TRACES_PATH} takes POST"), JSON)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope["headers"]}
        content_type = headers.get("content-type", "")
        try:
            body = await self._read(receive)
            if len(body) > _OFF_LOOP_BYTES:
                request = await asyncio.to_thread(
                    decode, body, content_type, headers.get("content-encoding", ""),
                    self.max_bytes)
            else:
                request = decode(body, content_type, headers.get("content-encoding", ""),
                                 self.max_bytes)
        except OtlpRejected as exc:
            self.rejected.labels(exc.reason).inc()
            log.warning("OTLP payload refused (%s): %s", exc.reason, exc)
            await _reply(send, exc.status, _error(exc.reason, str(exc)), JSON)
            return
        response = self.take(request)
        as_json = content_type.split(";", 1)[0].strip().lower() == JSON
        body = json_format.MessageToJson(response).encode() if as_json \
            else response.SerializeToString()
        await _reply(send, 200, body, JSON if as_json else PROTOBUF)

    def take(self, request: ExportTraceServiceRequest) -> ExportTraceServiceResponse:
        """Events out of a decoded payload, finished one by one; the OTLP answer."""
        decoded = request_events(request, self.classes, time.time(), time.perf_counter())
        for event in decoded.events:
            self.finish(event)
        self.spans.labels("event").inc(len(decoded.events))
        self.spans.labels("other").inc(decoded.num_other)
        response = ExportTraceServiceResponse()
        if decoded.incomplete:
            self.spans.labels("incomplete").inc(len(decoded.incomplete))
            log.warning("OTLP: %d request spans without usable latencies, first: %s",
                        len(decoded.incomplete), decoded.incomplete[0])
            response.partial_success.rejected_spans = len(decoded.incomplete)
            response.partial_success.error_message = "; ".join(decoded.incomplete[:5])
        return response

    async def _read(self, receive: Receive) -> bytes:
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            part = message.get("body", b"")
            size += len(part)
            if size > self.max_bytes:
                raise OtlpRejected(413, "too_large", f"body over {self.max_bytes} bytes")
            parts.append(part)
            if not message.get("more_body", False):
                return b"".join(parts)


def _error(reason: str, message: str) -> bytes:
    return json.dumps({"error": {"message": message, "reason": reason}}).encode()


async def _reply(send: Send, status: int, body: bytes, content_type: str) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body, "more_body": False})
