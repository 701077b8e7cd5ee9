"""A real Alertmanager for tests, and a webhook receiver to count what it notifies.

``running_alertmanager`` starts the `prometheus-alertmanager` (Debian) or `alertmanager`
binary as a child process on a loopback port, without clustering, its storage (silences and
the notification log, which survive a restart) in a temporary directory. It can be stopped
and started again on the same port and storage: how tests prove that delivery waits for a
down Alertmanager, or that a restart does not notify twice. Without the binary the test is
skipped, unless INFERWATCH_REQUIRE_INTEGRATION=1 (CI installs the Debian package): it fails.

``webhook_receiver`` records every notification POSTed to it, and ``webhook_config`` routes
everything there with 1 s grouping, so a test can count notifications within seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from monitor.alerting.alertmanager import SyncAlertmanagerClient
from tests.integration import unavailable
from tests.processes import free_port, stop_process, wait_ready

_NAMES = ("prometheus-alertmanager", "alertmanager")
_DEBIAN_PATH = "/usr/bin/prometheus-alertmanager"
_START_ATTEMPTS = 3  # a free port can be taken between our probe and Alertmanager's bind
_NULL_CONFIG = "route:\n  receiver: none\nreceivers:\n  - name: none\n"


def alertmanager_binary() -> str:
    """Path of the Alertmanager binary; skips (or fails, where required) the test without it."""
    for name in _NAMES:
        path = shutil.which(name)
        if path:
            return path
    if os.access(_DEBIAN_PATH, os.X_OK):
        return _DEBIAN_PATH
    unavailable("the Alertmanager binary is not installed (neither prometheus-alertmanager nor "
                "alertmanager on PATH; apt-get install prometheus-alertmanager)")


def amtool_binary() -> str:
    """Path of amtool (shipped with Alertmanager); skips or fails the test without it."""
    path = shutil.which("amtool") or ("/usr/bin/amtool" if os.access("/usr/bin/amtool", os.X_OK)
                                      else None)
    if path:
        return path
    unavailable("amtool is not installed (apt-get install prometheus-alertmanager)")


@dataclass
class RunningAlertmanager:
    """An Alertmanager child process; ``stop()`` and ``start()`` keep its port and storage."""

    binary: str
    port: int
    workdir: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.workdir / "alertmanager.yml"

    @property
    def log_path(self) -> Path:
        return self.workdir / "alertmanager.log"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def client(self, timeout: float = 5.0) -> SyncAlertmanagerClient:
        return SyncAlertmanagerClient(self.url, timeout=timeout)

    def start(self, timeout: float = 20.0) -> None:
        """Start (again) and wait for /-/ready; raises with the log's tail if it cannot."""
        if self.process is not None and self.process.poll() is None:
            return
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [self.binary, f"--config.file={self.config_path}",
                 f"--storage.path={self.workdir / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address=",
                 "--log.level=warn"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            ready = self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        if not ready:
            self.stop()
            raise RuntimeError(f"alertmanager on port {self.port} exited at start; its log:\n"
                               f"{self.log()[-3000:]}")

    def stop(self) -> None:
        """Terminate and reap the process (idempotent). SIGTERM lets it write its state."""
        process, self.process = self.process, None
        stop_process(process)

    def restart(self) -> None:
        self.stop()
        self.start()

    def _wait_ready(self, timeout: float) -> bool:
        return wait_ready(self.url, self.process, timeout, "alertmanager")


@contextmanager
def running_alertmanager(tmp_path: Path, config: str | None = None,
                         port: int | None = None) -> Iterator[RunningAlertmanager]:
    """Alertmanager with ``config`` (YAML text; default: one receiver that notifies nobody) on
    ``port`` (default: a free one), stopped on exit."""
    binary = alertmanager_binary()
    attempts = 1 if port is not None else _START_ATTEMPTS
    for attempt in range(1, attempts + 1):
        workdir = tmp_path / f"alertmanager{attempt}"
        workdir.mkdir(parents=True, exist_ok=True)
        am = RunningAlertmanager(binary, port if port is not None else free_port(), workdir)
        am.config_path.write_text(config if config is not None else _NULL_CONFIG)
        try:
            am.start()
            break
        except RuntimeError:
            if "address already in use" not in am.log() or attempt == attempts:
                raise
    try:
        yield am
    finally:
        am.stop()


# --- notifications -------------------------------------------------------------------------

@dataclass
class WebhookReceiver:
    """The notifications (Alertmanager's webhook JSON) POSTed to ``url``, in arrival order."""

    url: str
    _received: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def notifications(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._received)

    def alerts(self, status: str | None = None) -> list[dict[str, Any]]:
        """Every alert of every notification, optionally only "firing" or "resolved" ones."""
        return [a for n in self.notifications for a in n["alerts"]
                if status is None or a["status"] == status]

    def wait_for(self, condition: Callable[[list[dict[str, Any]]], bool],
                 timeout: float = 10.0) -> list[dict[str, Any]]:
        """Wait until ``condition(notifications)`` holds; returns the notifications."""
        deadline = time.monotonic() + timeout
        while True:
            seen = self.notifications
            if condition(seen):
                return seen
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout} s; received: {seen}")
            time.sleep(0.05)

    def _record(self, payload: dict[str, Any]) -> None:
        with self._lock:
            self._received.append(payload)


@contextmanager
def webhook_receiver() -> Iterator[WebhookReceiver]:
    """An HTTP server on a free loopback port recording POSTed notifications; answers 200."""
    receiver: WebhookReceiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            receiver._record(json.loads(body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = WebhookReceiver(f"http://127.0.0.1:{server.server_address[1]}/notify")
    thread = threading.Thread(target=server.serve_forever, name="webhook-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def webhook_config(url: str, *, group_by: Sequence[str] = ("alertname",),
                   group_wait: str = "1s", group_interval: str = "1s",
                   repeat_interval: str = "1h",
                   inhibit_rules: Sequence[dict[str, Any]] = ()) -> str:
    """Alertmanager YAML sending every notification, resolves included, to ``url``."""
    config: dict[str, Any] = {
        "route": {"receiver": "webhook", "group_by": list(group_by), "group_wait": group_wait,
                  "group_interval": group_interval, "repeat_interval": repeat_interval},
        "receivers": [{"name": "webhook",
                       "webhook_configs": [{"url": url, "send_resolved": True}]}],
    }
    if inhibit_rules:
        config["inhibit_rules"] = list(inhibit_rules)
    text: str = yaml.safe_dump(config, sort_keys=False)
    return text


def with_webhook_receivers(config_yaml: str, url: str, *, group_wait: str = "1s",
                           group_interval: str = "1s") -> str:
    """``config_yaml`` (e.g. alerts/alertmanager.yml) with its routes and inhibit rules kept
    but every receiver notifying ``url`` instead, and short grouping times everywhere."""
    config: dict[str, Any] = yaml.safe_load(config_yaml)
    config["receivers"] = [{"name": r["name"],
                            "webhook_configs": [{"url": url, "send_resolved": True}]}
                           for r in config["receivers"]]

    def shorten(route: dict[str, Any]) -> None:
        for key, value in (("group_wait", group_wait), ("group_interval", group_interval)):
            if key in route:
                route[key] = value
        for child in route.get("routes", ()):
            shorten(child)

    config["route"]["group_wait"] = group_wait
    config["route"]["group_interval"] = group_interval
    shorten(config["route"])
    text: str = yaml.safe_dump(config, sort_keys=False)
    return text
