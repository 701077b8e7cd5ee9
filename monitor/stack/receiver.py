"""A built-in alert receiver, for a machine without Alertmanager: a small HTTP server that logs
each alert when it starts firing and when it resolves (not the resends in between).

It takes the two forms alerts travel in, so the monitor's delivery path is the same with or
without Alertmanager:

- ``POST /api/v2/alerts``: Alertmanager's own v2 API, a JSON list of alerts (what the monitor
  posts); an ``endsAt`` not after now resolves the alert;
- ``POST /webhook``: Alertmanager's webhook notification (``{"alerts": [{"status": "firing",
  "labels": ...}, ...]}``), when a real Alertmanager forwards what it notifies.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from monitor.alerting.alertmanager import AmAlert, fingerprint
from monitor.stack.display import describe_alert

logger = logging.getLogger(__name__)

API_PATH: Final = "/api/v2/alerts"
WEBHOOK_PATH: Final = "/webhook"
_MAX_BODY_BYTES: Final = 10 * 1024 * 1024


@dataclass(frozen=True)
class Notice:
    """One change of an alert as the receiver saw it."""

    status: str                    # "firing" or "resolved"
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    source: str                    # "monitor" (the v2 API) or "alertmanager" (its webhook)
    received_at: float

    def describe(self) -> str:
        """'firing InferwatchSLOBurnRate{severity=page, slo=demo-availability, ...}'."""
        return f"{self.status} {describe_alert(self.labels)}"


NoticeCallback = Callable[[Notice], None]


class AlertReceiver:
    """Receives alerts on ``url`` (``start()`` first); ``notices`` are the changes seen."""

    def __init__(self, on_notice: NoticeCallback | None = None, host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self._on_notice = on_notice
        self._lock = threading.Lock()
        self._states: dict[tuple[str, str], str] = {}
        self._notices: list[Notice] = []
        self._server = ThreadingHTTPServer((host, port), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.1,),
                                        name="alert-receiver", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def webhook_url(self) -> str:
        return f"{self.url}{WEBHOOK_PATH}"

    @property
    def notices(self) -> list[Notice]:
        with self._lock:
            return list(self._notices)

    def start(self) -> AlertReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(5.0)
        self._server.server_close()

    def take_api_alerts(self, body: Any) -> None:
        """A v2 ``POST /api/v2/alerts`` body; ValueError if it is not a list of alerts."""
        if not isinstance(body, list):
            raise ValueError("expected a JSON list of alerts")
        now = datetime.now(UTC)
        try:
            alerts = [AmAlert.from_json(item) for item in body]
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not an alert: {exc}") from None
        for alert in alerts:
            status = "resolved" if alert.is_resolved(now) else "firing"
            self._record("monitor", status, alert.labels, alert.annotations)

    def take_webhook(self, body: Any) -> None:
        """An Alertmanager webhook notification; ValueError if it is not one."""
        try:
            alerts = [(str(a["status"]), dict(a["labels"]), dict(a.get("annotations") or {}))
                      for a in body["alerts"]]
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not an Alertmanager webhook notification: {exc}") from None
        for status, labels, notes in alerts:
            self._record("alertmanager", status, labels, notes)

    def _record(self, source: str, status: str, labels: Mapping[str, str],
                annotations: Mapping[str, str]) -> None:
        key = (source, fingerprint(labels))
        with self._lock:
            if self._states.get(key) == status:
                return  # a resend of what we already know
            if key not in self._states and status == "resolved":
                return  # the end of an alert we never saw firing: nothing to tell
            self._states[key] = status
            notice = Notice(status, dict(labels), dict(annotations), source, time.time())
            self._notices.append(notice)
        if self._on_notice is None:
            logger.info("alert from %s: %s", source, notice.describe())
        else:  # the callback shows it: a log line as well would say it twice
            self._on_notice(notice)


def _handler(receiver: AlertReceiver) -> type[BaseHTTPRequestHandler]:
    routes: dict[str, Callable[[Any], None]] = {API_PATH: receiver.take_api_alerts,
                                                WEBHOOK_PATH: receiver.take_webhook}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path in ("/-/ready", "/-/healthy")
            self._answer(200 if ok else 404, "OK" if ok else "not found")

        def do_POST(self) -> None:
            take = routes.get(self.path.split("?")[0])
            if take is None:
                self._answer(404, f"not found; POST to {API_PATH} or {WEBHOOK_PATH}")
                return
            length = int(self.headers.get("Content-Length") or 0)
            if length > _MAX_BODY_BYTES:
                self._answer(413, "body too large")
                return
            try:
                take(json.loads(self.rfile.read(length) or b"null"))
            except ValueError as exc:  # JSONDecodeError is one
                self._answer(400, str(exc))
                return
            self._answer(200, "")

        def _answer(self, status: int, text: str) -> None:
            body = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one access line per resend would bury the alerts

    return Handler
