"""One finished request as the gateway saw it: what metrics count and, later, what a store
keeps for exact percentiles."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from monitor.gateway.judge import SloClass
from monitor.gateway.measure import RequestTiming


@dataclass(slots=True)
class RequestEvent:
    path: str
    model: str  # as requested: a LoRA adapter's name when the client asks for one
    tenant: str  # the raw identity (hash or header value), before the cardinality budget
    slo_class: SloClass
    stream: bool
    timing: RequestTiming
    outcome: str = "ok"  # one of exporters.schema.GATEWAY_OUTCOMES
    status: int = 0  # the status the client got (0: it went away before any)
    upstream_status: int | None = None  # None: no answer from the upstream
    good: bool = False  # judged when the request finishes
    request_id: str | None = None  # the engine's, where it says (an OTLP span's gen_ai.request.id)


EventSink = Callable[[RequestEvent], None]
