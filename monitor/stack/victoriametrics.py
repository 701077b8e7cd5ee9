"""VictoriaMetrics' single-node server, vmagent and vmalert as child processes on free loopback
ports: the sharded deployment of exporters/promconfig/sharded.py, run for real."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

from monitor.stack.processes import Service, find_binary, start_http_service

# Debian's victoria-metrics package installs all three.
VICTORIA_METRICS: Final = "victoria-metrics"
VMAGENT: Final = "vmagent"
VMALERT: Final = "vmalert"
READY_PATH: Final = "/health"


def victoria_metrics_binaries() -> dict[str, str] | None:
    """The three binaries by name, or None if any is missing."""
    found = {name: find_binary((name,)) for name in (VICTORIA_METRICS, VMAGENT, VMALERT)}
    if any(path is None for path in found.values()):
        return None
    return {name: path for name, path in found.items() if path is not None}


def start_victoria_metrics(binary: str, workdir: Path, *, timeout: float = 30.0) -> Service:
    """A single-node VictoriaMetrics storing in ``workdir``. Samples are visible to queries
    at once (the default holds back the last 30 s, for clients that send late) and query
    results are not cached, so a test reads what was just written."""
    workdir.mkdir(parents=True, exist_ok=True)
    return start_http_service("VictoriaMetrics", lambda url, port: [
        binary, f"-storageDataPath={workdir / 'data'}", f"-httpListenAddr=127.0.0.1:{port}",
        "-search.latencyOffset=0s", "-search.disableCache", "-loggerLevel=WARN"],
        log_path=workdir / "victoria-metrics.log", timeout=timeout, ready_path=READY_PATH)


def start_vm_tool(name: str, argv: Sequence[str], workdir: Path, *,
                  timeout: float = 30.0) -> Service:
    """vmagent or vmalert as ``argv`` gives it (exporters.promconfig.sharded's command, its
    first word replaced by the binary's path), on a free port, its files in ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    extra = [f"-remoteWrite.tmpDataPath={workdir / 'remote-write'}"] if VMAGENT in argv[0] else []
    return start_http_service(name, lambda url, port: [
        *argv, *extra, f"-httpListenAddr=127.0.0.1:{port}", "-loggerLevel=WARN"],
        log_path=workdir / f"{name}.log", timeout=timeout, ready_path=READY_PATH)
