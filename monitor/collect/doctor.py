"""`inferwatch doctor URL`: does inferwatch understand this engine's /metrics page?

Fetches the page, detects the engine, asks the engine for its version where it has an
endpoint for that, and reports the page's coverage by the engine's mapping table
(``exporters.adapters.coverage``): the families mapped, not mapped (with the table's reason),
ignored (by rule), undecided, and the schema metrics missing.

Exit status: 0 when nothing is undecided or missing, 1 when something is (so CI can gate an
engine upgrade on it), 2 when the page cannot be had or read, or no known engine is on it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import SplitResult, urlsplit, urlunsplit

import httpx

from exporters.adapters import load_tables
from exporters.adapters.coverage import IGNORE_WHY, Coverage, coverage
from exporters.exposition import DEFAULT_MAX_BYTES, parse_page
from exporters.fetch import AUTO, ScrapeError, engines_for, fetch_page, require_samples

OK: Final = 0
INCOMPLETE: Final = 1
UNUSABLE: Final = 2
UNKNOWN: Final = "unknown"
VERSION_TIMEOUT_SECONDS: Final = 2.0  # a version is a nicety: never wait long for it


@dataclass(frozen=True, slots=True)
class VersionProbe:
    path: str  # at the server root, beside /metrics
    keys: tuple[str, ...]  # JSON keys that may hold the version, first found wins
    # Where the API listens on another port than /metrics: its offset from the metrics port.
    port_offset: int = 0


# Where each engine tells its version.
VERSION_PROBES: Final[Mapping[str, tuple[VersionProbe, ...]]] = {
    "vllm": (VersionProbe("/version", ("version",)),),
    "tgi": (VersionProbe("/info", ("version",)),),
    "sglang": (VersionProbe("/get_server_info", ("version",)),
               VersionProbe("/server_info", ("version",))),
    "llamacpp": (VersionProbe("/props", ("build_info", "version")),),
    # Triton serves /metrics on a port of its own (8002) beside its HTTP API (8000), whose
    # server metadata carries the version; the same port is tried second (a proxy for both).
    "triton": (VersionProbe("/v2", ("version",), port_offset=-2),
               VersionProbe("/v2", ("version",))),
}


@dataclass(frozen=True, slots=True)
class Version:
    value: str  # UNKNOWN when no probe answered
    source: str  # how it was learned ("GET http://host:8000/version"), or why not


@dataclass(frozen=True, slots=True)
class Report:
    url: str
    version: Version
    coverage: Coverage

    @property
    def exit_status(self) -> int:
        return OK if self.coverage.complete else INCOMPLETE

    def as_dict(self) -> dict[str, Any]:
        return {"url": self.url, "engines": list(self.coverage.engines),
                "version": {"value": self.version.value, "source": self.version.source},
                "coverage": self.coverage.as_dict(), "complete": self.coverage.complete,
                "exit_status": self.exit_status}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("url", help="the engine's metrics page, e.g. http://127.0.0.1:8000/metrics")
    p.add_argument("--engine", default=AUTO, choices=(AUTO, *load_tables()),
                   help="mapping table to check against; auto detects it from the page")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds the page fetch may take")
    p.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES,
                   help="largest page accepted")
    p.add_argument("--json", action="store_true", help="one JSON object, for machines")


def run(args: argparse.Namespace) -> int:
    # trust_env off: straight to the engine, never through an environment proxy.
    with httpx.Client(trust_env=False, follow_redirects=False) as client:
        try:
            report = examine(client, args.url, args.engine, args.timeout, args.max_bytes)
        except ScrapeError as exc:
            if args.json:
                print(json.dumps({"url": args.url, "error": {"reason": exc.reason,
                                                             "message": str(exc)}}))
            else:
                print(f"inferwatch doctor: {exc} ({exc.reason})", file=sys.stderr)
            return UNUSABLE
    print(json.dumps(report.as_dict(), indent=2) if args.json else render(report))
    return report.exit_status


def examine(client: httpx.Client, url: str, engine: str = AUTO, timeout: float = 5.0,
            max_bytes: int = DEFAULT_MAX_BYTES) -> Report:
    """The page's coverage and the engine's version; ScrapeError when the page is unusable."""
    parsed = parse_page(fetch_page(client, url, timeout, max_bytes), url, max_bytes)
    require_samples(parsed, url)
    engines = engines_for(parsed, engine)
    return Report(url, probe_version(client, url, engines), coverage(parsed, engines))


def probe_version(client: httpx.Client, metrics_url: str, engines: list[str]) -> Version:
    """The first engine's version from its endpoint; UNKNOWN, saying why, otherwise."""
    probes = next((VERSION_PROBES[e] for e in engines if e in VERSION_PROBES), ())
    if not probes:
        return Version(UNKNOWN, f"no version endpoint known for {', '.join(engines)}")
    parts = urlsplit(metrics_url)
    failures = []
    for probe in probes:
        netloc = _netloc(parts, probe.port_offset)
        if netloc is None:
            failures.append(f"{probe.path}: no port in {metrics_url} to offset by "
                            f"{probe.port_offset}")
            continue
        url = urlunsplit((parts.scheme, netloc, probe.path, "", ""))
        value, failure = _ask(client, url, probe.keys)
        if value is not None:
            return Version(value, f"GET {url}")
        failures.append(f"GET {url}: {failure}")
    return Version(UNKNOWN, "; ".join(failures))


def _netloc(parts: SplitResult, port_offset: int) -> str | None:
    """The metrics URL's host and port, the port moved by ``port_offset`` (None without one)."""
    if port_offset == 0:
        return parts.netloc
    try:
        port = parts.port
    except ValueError:
        return None
    if port is None or not 0 < port + port_offset < 65536 or parts.hostname is None:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{host}:{port + port_offset}"


def _ask(client: httpx.Client, url: str, keys: tuple[str, ...]) -> tuple[str | None, str]:
    try:
        response = client.get(url, timeout=VERSION_TIMEOUT_SECONDS)
    except httpx.HTTPError as exc:
        return None, type(exc).__name__
    if not response.is_success:
        return None, f"HTTP {response.status_code}"
    try:
        body = response.json()
    except ValueError:
        return None, "not JSON"
    if isinstance(body, dict):
        for key in keys:
            value = body.get(key)
            if isinstance(value, str | int | float) and not isinstance(value, bool) and value != "":
                return str(value), ""
    return None, f"no {' or '.join(keys)} in the answer"


def render(report: Report) -> str:
    """The report for a person: every family by its decision, then the verdict."""
    c = report.coverage
    lines = [
        f"page:       {report.url}",
        f"engine:     {', '.join(c.engines)}",
        f"version:    {report.version.value} ({report.version.source})",
        f"mapped:     {len(c.mapped)} families",
        *(f"  {name}" for name in c.mapped),
        f"not mapped: {len(c.not_mapped)} families",
        *(f"  {name}: {why}" for name, why in c.not_mapped.items()),
        f"ignored:    {len(c.ignored)} families",
        *(f"  {rule}: {count} ({IGNORE_WHY[rule]})"
          for rule, count in sorted(c.ignored_by_rule().items())),
        f"undecided:  {len(c.undecided)} families (on the page, neither mapped, nor listed "
        "as not mapped, nor ignored)",
        *(f"  {name}" for name in c.undecided),
        f"missing:    {len(c.missing)} schema metrics (mapped, but no source on the page)",
        *(f"  {name}" for name in c.missing),
        f"absent:     {len(c.absent)} schema metrics (mapped from sources the engine exports "
        "only under a condition this server does not meet)",
        *(f"  {name}: needs {why}" for name, why in c.absent.items()),
    ]
    verdict = ("complete: every family decided, nothing missing" if c.complete else
               "incomplete: decide the undecided families and check the missing metrics in "
               "exporters/adapters/mappings/")
    return "\n".join([*lines, verdict])
