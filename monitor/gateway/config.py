"""The gateway's one config object, validated when built."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import httpx

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

    def __post_init__(self) -> None:
        try:
            url = httpx.URL(self.upstream)
        except httpx.InvalidURL as exc:
            raise ValueError(f"upstream {self.upstream!r} is not a URL: {exc}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"upstream {self.upstream!r} must be an http(s) URL with a host")
        if not (self.timeout_seconds > 0 and math.isfinite(self.timeout_seconds)):
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout_seconds}")
        if self.max_tenants < 0:
            raise ValueError(f"max_tenants must be >= 0, got {self.max_tenants}")
        if len(self.tenant_salt) < 8:
            raise ValueError("the tenant salt must be at least 8 bytes")
