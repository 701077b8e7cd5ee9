"""The gateway's one config object, validated when built."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from exporters.otlp_config import TEMPORALITIES as TEMPORALITIES
from exporters.otlp_config import OtlpMetricsConfig as OtlpMetricsConfig
from exporters.otlp_config import check_http_url
from monitor.gateway.judge import SloClasses, load_slo_classes


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    upstream: str  # the engine's base URL, e.g. http://127.0.0.1:8000
    tenant_salt: bytes  # keys are hashed with it; keep it secret and stable across restarts
    # Connect, and the upstream's silence: before its answer and between two chunks.
    timeout_seconds: float = 60.0
    max_tenants: int = 20  # tenants with their own label value; the rest are "other"
    tenant_header: str | None = None  # identity from this header instead of the API key
    slo_classes: SloClasses = field(default_factory=load_slo_classes)
    otlp_metrics: OtlpMetricsConfig | None = None  # None: no OTLP metrics push

    def __post_init__(self) -> None:
        check_http_url("upstream", self.upstream)
        if not (self.timeout_seconds > 0 and math.isfinite(self.timeout_seconds)):
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout_seconds}")
        if self.max_tenants < 0:
            raise ValueError(f"max_tenants must be >= 0, got {self.max_tenants}")
        if len(self.tenant_salt) < 8:
            raise ValueError("the tenant salt must be at least 8 bytes")

