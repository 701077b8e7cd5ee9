"""The files the demo writes into its work directory: the SLOs, the monitor's inferwatch.yaml,
the Prometheus rules generated from the same SLOs."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

import yaml

from monitor.slo.loaders import load_slos
from monitor.slo.rules import generate_rules
from monitor.slo.spec import Slo

SLOS_FILE: Final = "demo_slos.yaml"
WINDOWS_FILE: Final = "demo_burn_windows.yaml"
TARGET: Final = "reference-0"
SCRAPE_INTERVAL_SECONDS: Final = 2.0
EVALUATION_INTERVAL_SECONDS: Final = 5.0
# A minute counts as closed this long after it ends: scrapes every 2 s reach the store
# well within it, and a page is not held back waiting for the minute (the open minute counts).
SETTLE_SECONDS: Final = 10.0
RESEND_SECONDS: Final = 30.0
ANOMALY_STEP_SECONDS: Final = 15.0


def _packaged(name: str) -> str:
    return resources.files("monitor.stack").joinpath(name).read_text(encoding="utf-8")


def write_slos(workdir: Path) -> tuple[Path, list[Slo]]:
    """The demo's SLO file in ``workdir``, pointing at its burn-window table there; the file
    and its SLOs (validated as the monitor will read them)."""
    windows = workdir / WINDOWS_FILE
    windows.write_text(_packaged(WINDOWS_FILE), encoding="utf-8")
    spec = yaml.safe_load(_packaged(SLOS_FILE))
    for slo in spec["slos"]:
        slo.setdefault("alerting", {})["windows_file"] = str(windows)
    path = workdir / SLOS_FILE
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path, load_slos(path)


@dataclass(frozen=True, slots=True)
class MonitorFiles:
    """What the monitor's config names; ``write(port)`` writes it for a service on ``port``."""

    workdir: Path
    reference_url: str
    slos_path: Path
    alertmanager_url: str

    def config(self, port: int) -> dict[str, Any]:
        interval = SCRAPE_INTERVAL_SECONDS
        return {
            "defaults": {"scrape_interval_seconds": interval,
                         "scrape_timeout_seconds": interval * 0.75},
            "store": {"url": f"sqlite:///{self.workdir / 'inferwatch.db'}"},
            "targets": [{"name": TARGET, "url": f"{self.reference_url}/metrics",
                         "engine": "auto", "labels": {"model": "tiny", "role": "demo"}}],
            "slos": [self.slos_path.name],
            "alerting": {"alertmanager_urls": [self.alertmanager_url],
                         "evaluation_interval_seconds": EVALUATION_INTERVAL_SECONDS,
                         "settle_seconds": SETTLE_SECONDS,
                         "resend_seconds": RESEND_SECONDS,
                         "external_url": f"http://127.0.0.1:{port}"},
            "anomaly": {"enabled": True, "step_seconds": ANOMALY_STEP_SECONDS},
        }

    def write(self, port: int) -> Path:
        path = self.workdir / "inferwatch.yaml"
        path.write_text(yaml.safe_dump(self.config(port), sort_keys=False), encoding="utf-8")
        return path


def write_rules(directory: Path, slos: list[Slo]) -> Path:
    """Prometheus recording and alerting rules for ``slos`` (`inferwatch rules generate`)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "inferwatch-slo.rules.yml"
    path.write_text(generate_rules(slos, interval_seconds=EVALUATION_INTERVAL_SECONDS),
                    encoding="utf-8")
    return path
