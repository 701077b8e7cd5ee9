"""The OTLP/HTTP metrics push's settings, shared by the gateway and the bridge: the config
object, its command-line flags and OpenTelemetry's standard environment variables (read where
the flags are not given)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from urllib.parse import unquote

import httpx

TEMPORALITIES: Final = ("cumulative", "delta")
OTLP_ENDPOINT_ENV: Final = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
OTLP_INTERVAL_ENV: Final = "OTEL_METRIC_EXPORT_INTERVAL"  # milliseconds
OTLP_TEMPORALITY_ENV: Final = "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"
# Read by the SDK for the gateway; by otlp_headers() for the bridge, which posts itself.
OTLP_HEADERS_ENVS: Final = ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")


@dataclass(frozen=True, slots=True)
class OtlpMetricsConfig:
    """The OTLP/HTTP metrics push: where, how often, which temporality."""

    endpoint: str  # the full signal URL, e.g. http://collector:4318/v1/metrics
    interval_seconds: float = 60.0  # OTel's default export interval
    timeout_seconds: float = 10.0  # one export, its retries included
    temporality: str = "cumulative"  # or delta (counters and histograms)

    def __post_init__(self) -> None:
        check_http_url("the OTLP metrics endpoint", self.endpoint)
        for what, seconds in (("interval", self.interval_seconds),
                              ("timeout", self.timeout_seconds)):
            if not (seconds > 0 and math.isfinite(seconds)):
                raise ValueError(f"the OTLP metrics {what} must be > 0 seconds, got {seconds}")
        if self.temporality not in TEMPORALITIES:
            raise ValueError(f"the OTLP metrics temporality must be one of {TEMPORALITIES}, "
                             f"got {self.temporality!r}")


def check_http_url(what: str, value: str) -> None:
    try:
        url = httpx.URL(value)
    except httpx.InvalidURL as exc:
        raise ValueError(f"{what} {value!r} is not a URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"{what} {value!r} must be an http(s) URL with a host")


def add_otlp_metrics_arguments(p: argparse.ArgumentParser, description: str,
                               temporalities: tuple[str, ...] = TEMPORALITIES) -> None:
    """``--otlp-metrics-endpoint/-interval/-timeout/-temporality``, in their own group."""
    otlp = p.add_argument_group("OTLP metrics push", description)
    otlp.add_argument("--otlp-metrics-endpoint", default=None, metavar="URL",
                      help="the collector's full metrics URL, e.g. "
                           f"http://127.0.0.1:4318/v1/metrics (default: ${OTLP_ENDPOINT_ENV}; "
                           "neither: no push)")
    otlp.add_argument("--otlp-metrics-interval", type=float, default=None, metavar="S",
                      help=f"seconds between pushes (default: ${OTLP_INTERVAL_ENV} in ms, or 60)")
    otlp.add_argument("--otlp-metrics-timeout", type=float, default=10.0, metavar="S",
                      help="seconds one push may take, retries included")
    otlp.add_argument("--otlp-metrics-temporality", choices=temporalities,
                      default=None, help=f"default: ${OTLP_TEMPORALITY_ENV}, or cumulative")


def otlp_metrics_config(args: argparse.Namespace, env: Mapping[str, str]
                        ) -> OtlpMetricsConfig | None:
    """The push's config from the flags, else OpenTelemetry's variables; None: no push."""
    endpoint = args.otlp_metrics_endpoint or env.get(OTLP_ENDPOINT_ENV)
    if not endpoint:
        return None
    interval = args.otlp_metrics_interval
    if interval is None:
        interval = _env_milliseconds(env, OTLP_INTERVAL_ENV, 60_000) / 1000
    temporality = args.otlp_metrics_temporality
    if temporality is None:
        preference = env.get(OTLP_TEMPORALITY_ENV, "cumulative").strip().lower()
        # lowmemory is delta for counters and histograms, the only kinds pushed here
        temporality = "delta" if preference == "lowmemory" else preference
        if temporality not in TEMPORALITIES:
            raise ValueError(f"${OTLP_TEMPORALITY_ENV}={preference!r}: expected cumulative, "
                             "delta or lowmemory")
    return OtlpMetricsConfig(endpoint=endpoint, interval_seconds=interval,
                             timeout_seconds=args.otlp_metrics_timeout, temporality=temporality)


def _env_milliseconds(env: Mapping[str, str], name: str, default: float) -> float:
    value = env.get(name)
    if not value:
        return default
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"${name}={value!r} is not a number of milliseconds") from None


def key_values(text: str, where: str) -> dict[str, str]:
    """OpenTelemetry's ``key=value,key=value`` lists (headers, resource attributes): values
    percent-decoded; ``where`` names the variable in the error for a malformed item."""
    out: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{where}: {item!r} is not key=value")
        out[key.strip()] = unquote(value.strip())
    return out


def otlp_headers(env: Mapping[str, str]) -> dict[str, str]:
    """Headers for the metrics push: $OTEL_EXPORTER_OTLP_METRICS_HEADERS, else
    $OTEL_EXPORTER_OTLP_HEADERS (as the SDK reads them)."""
    for name in OTLP_HEADERS_ENVS:
        if env.get(name):
            return key_values(env[name], f"${name}")
    return {}
