"""Alertmanager as a child process: no clustering, its storage in a work directory, every
notification (resolves included) sent to one webhook."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import yaml

from monitor.stack.processes import Service, find_binary, start_http_service

# Debian and Ubuntu package it as prometheus-alertmanager; upstream releases as alertmanager.
BINARY_NAMES: Final = ("prometheus-alertmanager", "alertmanager")


def alertmanager_binary() -> str | None:
    return find_binary(BINARY_NAMES)


def webhook_config(webhook_url: str, *, group_wait: str = "1s",
                   group_interval: str = "5s") -> dict[str, Any]:
    """Route every alert, each in a group of its own (``...``), to ``webhook_url``; short
    grouping times so that a demo sees a notification within seconds of the alert."""
    return {
        "route": {"receiver": "webhook", "group_by": ["..."], "group_wait": group_wait,
                  "group_interval": group_interval, "repeat_interval": "4h"},
        "receivers": [{"name": "webhook",
                       "webhook_configs": [{"url": webhook_url, "send_resolved": True}]}],
    }


def start_alertmanager(binary: str, workdir: Path, config: dict[str, Any], *,
                       timeout: float = 20.0, port: int | None = None) -> Service:
    """Alertmanager with ``config`` on a free loopback port (or ``port``: a restart where its
    clients expect it); returns once /-/ready answers."""
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "alertmanager.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    return start_http_service("Alertmanager", lambda url, port: [
        binary, f"--config.file={config_path}", f"--storage.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
        f"--web.external-url={url}", "--log.level=warn"],
        log_path=workdir / "alertmanager.log", timeout=timeout, port=port)
