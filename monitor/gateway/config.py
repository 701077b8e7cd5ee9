"""The gateway's one config object, validated when built."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final

import httpx

from monitor.gateway.judge import SloClasses, load_slo_classes

TEMPORALITIES: Final = ("cumulative", "delta")


@dataclass(frozen=True, slots=True)
class OtlpMetricsConfig:
    """The OTLP/HTTP metrics push (``otlp_metrics.py``): where, how often, which temporality."""

    endpoint: str  # the full signal URL, e.g. http://collector:4318/v1/metrics
    interval_seconds: float = 60.0  # OTel's default export interval
    timeout_seconds: float = 10.0  # one export, its retries included
    temporality: str = "cumulative"  # or delta (counters and histograms)

    def __post_init__(self) -> None:
        _check_url("the OTLP metrics endpoint", self.endpoint)
        for what, seconds in (("interval", self.interval_seconds),
                              ("timeout", self.timeout_seconds)):
            if not (seconds > 0 and math.isfinite(seconds)):
                raise ValueError(f"the OTLP metrics {what} must be > 0 seconds, got {seconds}")
        if self.temporality not in TEMPORALITIES:
            raise ValueError(f"the OTLP metrics temporality must be one of {TEMPORALITIES}, "
                             f"got {self.temporality!r}")


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
        _check_url("upstream", self.upstream)
        if not (self.timeout_seconds > 0 and math.isfinite(self.timeout_seconds)):
            raise ValueError(f"timeout must be > 0 seconds, got {self.timeout_seconds}")
        if self.max_tenants < 0:
            raise ValueError(f"max_tenants must be >= 0, got {self.max_tenants}")
        if len(self.tenant_salt) < 8:
            raise ValueError("the tenant salt must be at least 8 bytes")


def _check_url(what: str, value: str) -> None:
    try:
        url = httpx.URL(value)
    except httpx.InvalidURL as exc:
        raise ValueError(f"{what} {value!r} is not a URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"{what} {value!r} must be an http(s) URL with a host")
