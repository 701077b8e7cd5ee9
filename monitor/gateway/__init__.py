"""`inferwatch gateway`: an OpenAI-compatible streaming reverse proxy that measures and judges
every request at the edge (TTFT, ITL, TPOT, E2E, outcome, usage) by model, tenant and SLO
class, and exports exact good/total counters on its own /metrics. It also takes OTLP/HTTP
trace payloads on /v1/traces: vLLM's request spans become the same events."""

from monitor.gateway.config import GatewayConfig
from monitor.gateway.events import EventSink, RequestEvent
from monitor.gateway.judge import SloClass, SloClasses, SloConfigError, load_slo_classes
from monitor.gateway.measure import RequestTiming, StreamMeter
from monitor.gateway.otlp_receiver import OtlpReceiver
from monitor.gateway.proxy import Gateway
from monitor.gateway.tenants import TenantBudget, TenantIdentifier

__all__ = [
    "EventSink",
    "Gateway",
    "GatewayConfig",
    "OtlpReceiver",
    "RequestEvent",
    "RequestTiming",
    "SloClass",
    "SloClasses",
    "SloConfigError",
    "StreamMeter",
    "TenantBudget",
    "TenantIdentifier",
    "load_slo_classes",
]
