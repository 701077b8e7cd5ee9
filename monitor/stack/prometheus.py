"""Prometheus as a child process: scraping the stack, evaluating the SLOs' generated rules,
alerting to an Alertmanager when there is one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import httpx
import yaml

from monitor.stack.processes import Service, find_binary, start_http_service

BINARY_NAMES: Final = ("prometheus",)


def prometheus_binary() -> str | None:
    return find_binary(BINARY_NAMES)


def host_port(url: str) -> str:
    """"127.0.0.1:9090" from "http://127.0.0.1:9090/metrics": what scrape configs name."""
    parsed = httpx.URL(url)
    return f"{parsed.host}:{parsed.port}"


def prometheus_config(jobs: Mapping[str, str], *, interval_seconds: float,
                      rule_files: Sequence[str] = (), alertmanager_url: str | None = None,
                      external_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A prometheus.yml scraping each job's URL (``{job: "http://host:port"}``, path
    /metrics), evaluating ``rule_files`` and sending alerts to ``alertmanager_url``."""
    interval = f"{interval_seconds:g}s"
    config: dict[str, Any] = {
        "global": {"scrape_interval": interval, "scrape_timeout": interval,
                   "evaluation_interval": interval,
                   "external_labels": dict(external_labels or {})},
        "rule_files": list(rule_files),
        "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [host_port(url)]}]}
                           for job, url in jobs.items()],
    }
    if alertmanager_url:
        config["alerting"] = {"alertmanagers": [
            {"static_configs": [{"targets": [host_port(alertmanager_url)]}]}]}
    return config


def start_prometheus(binary: str, workdir: Path, config: Mapping[str, Any], *,
                     timeout: float = 30.0) -> Service:
    """Prometheus with ``config`` on a free loopback port, its storage and log in ``workdir``;
    returns once /-/ready answers."""
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(dict(config), sort_keys=False))

    return start_http_service("Prometheus", lambda url, port: [
        binary, f"--config.file={config_path}", f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", f"--web.external-url={url}",
        "--log.level=warn"], log_path=workdir / "prometheus.log", timeout=timeout)
