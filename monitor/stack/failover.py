"""The kill -9 failover scenario, shared by its test (tests/monitor/stack/test_failover.py)
and its benchmark (bench/failover.py).

Two `inferwatch serve` replicas on one PostgreSQL database watch a reference server under a
steady load; their alerts go to a real Alertmanager that notifies a webhook receiver. A trial:
an error fault is injected, the availability page fires and is notified; the active replica
is killed with SIGKILL; the standby must become active; the fault is cleared and the resolve
must be notified. Alertmanager groups each alert on its own and never repeats within the
trial, so a page that reached the receiver exactly once firing and once resolved was neither
lost nor duplicated by the failover.

The SLO (99%) pages on a burn rate of 50 over 2 minutes and 1 minute: half the requests
failing. The load runs only during a trial, so the page fires within seconds of the fault
(no clean traffic before it to dilute the errors). A resolve waits for the errors to leave the
short window, which the evaluator reads as the minute still open (whole) plus a share of the
closed minute before it: the fault is therefore cleared just after a minute starts, and the
page resolves once the clean seconds of the new minute outweigh that share of the errors
(10-30 s) instead of up to 90 s.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
import yaml

from monitor.stack import alertmanager
from monitor.stack.monitor_service import LISTENING
from monitor.stack.processes import Service, start_child, start_on_free_port, wait_http_ready
from monitor.stack.receiver import AlertReceiver, Notice
from monitor.stack.reference import start_reference_server

SLO_NAME: Final = "failover-availability"
SCRAPE_SECONDS: Final = 1.0
EVALUATION_SECONDS: Final = 1.0
POLL_SECONDS: Final = 0.5
SETTLE_SECONDS: Final = 2.0
LOAD_INTERVAL_SECONDS: Final = 0.2  # about 5 requests a second (one at a time)

_SLOS: Final = {"slos": [{
    "name": SLO_NAME, "service": "failover", "objective": 0.99, "window": "7d",
    "description": "99% of requests answered without an error",
    "sli": {"kind": "availability", "errors": ["oom", "timeout", "model_error", "rejected"]},
    "alerting": {"min_events": 5, "ticket": False, "windows": [
        {"severity": "page", "long_seconds": "2m", "short_seconds": "1m", "factor": 50}]},
}]}


class CountingReceiver(AlertReceiver):
    """The built-in receiver, also keeping every webhook notification as it came (the
    receiver's ``notices`` skip a repeat of a state: a duplicate is what is counted here)."""

    def __init__(self) -> None:
        super().__init__(on_notice=lambda _notice: None)
        self.notifications: list[Notice] = []

    def take_webhook(self, body: Any) -> None:
        super().take_webhook(body)  # validates it
        for a in body["alerts"]:
            self.notifications.append(Notice(str(a["status"]), dict(a["labels"]), {},
                                             "alertmanager", time.time()))


class ScenarioError(RuntimeError):
    """A step of the scenario did not happen in time; the message says which."""


@dataclass(frozen=True)
class Trial:
    failover_seconds: float          # SIGKILL of the active -> the standby reports active
    killed: str                      # the replica id killed
    firing: int                      # firing notifications of the page
    resolved: int                    # resolved notifications of the page
    others: int                      # notifications of any other alert

    @property
    def lost(self) -> int:
        """Pages not notified (firing or resolve missing)."""
        return int(self.firing == 0) + int(self.resolved == 0)

    @property
    def duplicated(self) -> int:
        """Notifications beyond the one firing and the one resolve of the page."""
        return max(self.firing - 1, 0) + max(self.resolved - 1, 0) + self.others


@dataclass
class Replica:
    replica_id: str
    service: Service | None = None

    @property
    def url(self) -> str:
        assert self.service is not None
        return self.service.url


@dataclass
class FailoverStack:
    """Everything a trial needs, started by ``start`` and stopped by ``close``."""

    workdir: Path
    postgres_url: str
    python: str = sys.executable
    replicas: list[Replica] = field(default_factory=lambda: [Replica("replica-a"),
                                                            Replica("replica-b")])
    reference: Service | None = None
    admin_token: str = field(default_factory=lambda: secrets.token_urlsafe(16))
    receiver: CountingReceiver = field(default_factory=CountingReceiver)
    alertmanager: Service | None = None
    _cleanup: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _load_stop: threading.Event = field(default_factory=threading.Event)
    _load_on: threading.Event = field(default_factory=threading.Event)
    _alertmanager_config: dict[str, Any] | None = None

    # --- start and stop ---

    def start(self) -> None:
        binary = alertmanager.alertmanager_binary()
        if binary is None:
            raise ScenarioError("no Alertmanager binary (prometheus-alertmanager)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        child, url = start_reference_server(
            ["--model", "tiny", "--enable-fault-injection", f"--admin-token={self.admin_token}"],
            120.0, log_path=self.workdir / "reference-server.log")
        self.reference = Service("reference server", url, child)
        self._cleanup.callback(self.reference.stop)
        self.receiver.start()
        self._cleanup.callback(self.receiver.stop)
        # Each alert a group of its own, notified a second after it changes; never repeated
        # within a trial (repeat_interval 4h): every notification is a change.
        config = alertmanager.webhook_config(self.receiver.webhook_url, group_wait="1s",
                                             group_interval="2s")
        self._alertmanager_config = config
        self.alertmanager = alertmanager.start_alertmanager(binary, self.workdir / "am", config)
        self._cleanup.callback(self._stop_alertmanager)
        (self.workdir / "slos.yaml").write_text(yaml.safe_dump(_SLOS, sort_keys=False))
        thread = threading.Thread(target=self._load, name="failover-load", daemon=True)
        thread.start()
        self._cleanup.callback(thread.join, 10.0)
        self._cleanup.callback(self._load_stop.set)
        for replica in self.replicas:
            self.start_replica(replica)
        self._cleanup.callback(self._stop_replicas)

    def close(self) -> None:
        self._cleanup.close()

    def __enter__(self) -> FailoverStack:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_replica(self, replica: Replica) -> None:
        """`inferwatch serve` for ``replica`` on a free port; returns once /readyz answers
        (a standby is ready once it reads the store)."""
        def start(port: int) -> Service:
            config = self._write_config(replica.replica_id, port)
            child = start_child(replica.replica_id, [
                self.python, "-m", "monitor.cli", "--log-level", "INFO", "serve",
                "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
                log_path=self.workdir / f"{replica.replica_id}.log")
            try:
                url = child.wait_for_line(LISTENING, 60.0).group(1)
                wait_http_ready(child, f"{url}/readyz", 60.0)
            except BaseException:
                child.stop()
                raise
            return Service(replica.replica_id, url, child)

        replica.service = start_on_free_port(start)

    def _write_config(self, replica_id: str, port: int) -> Path:
        assert self.reference is not None and self.alertmanager is not None
        config: dict[str, Any] = {
            "defaults": {"scrape_interval_seconds": SCRAPE_SECONDS,
                         "scrape_timeout_seconds": SCRAPE_SECONDS * 0.75},
            "store": {"url": self.postgres_url},
            "targets": [{"name": "reference-0", "url": f"{self.reference.url}/metrics",
                         "engine": "auto"}],
            "slos": ["slos.yaml"],
            "alerting": {"alertmanager_urls": [self.alertmanager.url],
                         "evaluation_interval_seconds": EVALUATION_SECONDS,
                         "settle_seconds": SETTLE_SECONDS,
                         "external_url": f"http://127.0.0.1:{port}"},
            "anomaly": {"enabled": False},
            "ha": {"poll_seconds": POLL_SECONDS, "replica_id": replica_id},
        }
        path = self.workdir / f"{replica_id}.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        return path

    def _stop_replicas(self) -> None:
        for replica in self.replicas:
            if replica.service is not None and replica.service.child.alive():
                replica.service.stop()

    def _load(self) -> None:
        assert self.reference is not None
        body = {"model": "tiny", "prompt": "the quick brown fox", "max_tokens": 4}
        with httpx.Client(timeout=30.0) as client:
            while not self._load_stop.wait(LOAD_INTERVAL_SECONDS):
                if not self._load_on.is_set():
                    continue
                with contextlib.suppress(httpx.HTTPError):
                    client.post(f"{self.reference.url}/v1/completions", json=body)

    # --- reading the replicas ---

    def status(self, replica: Replica) -> dict[str, Any] | None:
        try:
            resp = httpx.get(f"{replica.url}/api/v1/status/ha", timeout=2.0)
        except httpx.HTTPError:
            return None
        return resp.json() if resp.status_code == 200 else None

    def active(self, timeout: float = 30.0) -> Replica:
        """The one replica that says it is active (waits for one)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            actives = [r for r in self.replicas if r.service is not None
                       and r.service.child.alive()
                       and (self.status(r) or {}).get("role") == "active"]
            if len(actives) == 1:
                return actives[0]
            if len(actives) > 1:
                raise ScenarioError(f"two active replicas: {[r.replica_id for r in actives]}")
            time.sleep(0.05)
        raise ScenarioError(f"no active replica after {timeout:g} s")

    def alerts(self, replica: Replica) -> list[dict[str, Any]]:
        """The replica's alert book as its API serves it."""
        resp = httpx.get(f"{replica.url}/api/v1/alerts", timeout=5.0)
        resp.raise_for_status()
        items: list[dict[str, Any]] = resp.json()["items"]
        return items

    def page_notices(self) -> list[Notice]:
        """Every notification of the SLO's page, as Alertmanager sent them."""
        return [n for n in list(self.receiver.notifications)
                if n.labels.get("slo") == SLO_NAME and n.labels.get("severity") == "page"]

    def other_notices(self) -> list[Notice]:
        return [n for n in list(self.receiver.notifications)
                if not (n.labels.get("slo") == SLO_NAME and n.labels.get("severity") == "page")]

    # --- one trial ---

    def run_trial(self, *, say: Callable[[str], None] = lambda _s: None,
                  page_timeout: float = 60.0, resolve_timeout: float = 120.0) -> Trial:
        """Fault, page, kill -9 of the active, failover, clear, resolve; then the killed
        replica is started again (as a standby) for the next trial."""
        assert self.reference is not None
        started = time.monotonic()

        def note(what: str) -> None:
            say(f"[{time.monotonic() - started:5.1f} s] {what}")

        before_page, before_other = len(self.page_notices()), len(self.other_notices())
        self.start_incident(page_timeout=page_timeout)
        note("load on, fault injected: every request fails; page notified")
        victim = self.active()
        standby = next(r for r in self.replicas if r is not victim)
        assert victim.service is not None
        os.kill(victim.service.child.pid, signal.SIGKILL)
        killed = time.monotonic()
        self.wait_until(lambda: (self.status(standby) or {}).get("role") == "active", 30.0,
                   f"{standby.replica_id} did not become active")
        failover = time.monotonic() - killed
        note(f"{victim.replica_id} killed; {standby.replica_id} active after {failover:.2f} s")
        victim.service.stop()  # reaps it
        firing, resolved, others = self.resolve(before_page, before_other, note,
                                                resolve_timeout)
        trial = Trial(failover, victim.replica_id, firing, resolved, others)
        note(f"resolve notified; {trial}")
        self.start_replica(victim)
        return trial

    def resolve(self, before_page: int, before_other: int, note: Callable[[str], None],
                resolve_timeout: float = 120.0) -> tuple[int, int, int]:
        """Clear the fault, wait for the resolve; the page's firing and resolved notifications
        since ``before_page`` and the other notifications since ``before_other``."""
        # Clear just after a minute starts, a few rounds of the active later (see above).
        wait = 60.0 - time.time() % 60.0 + 1.0
        time.sleep(wait if wait > 5.0 else wait + 60.0)
        self._clear_faults()
        note("fault cleared")
        self.wait_until(lambda: any(n.status == "resolved"
                               for n in self.page_notices()[before_page:]),
                   resolve_timeout, "the resolve was not notified")
        self._load_on.clear()
        time.sleep(3.0)  # a duplicate would come within Alertmanager's group_interval
        notices = self.page_notices()[before_page:]
        return (sum(n.status == "firing" for n in notices),
                sum(n.status == "resolved" for n in notices),
                len(self.other_notices()) - before_other)

    def start_incident(self, page: bool = True, page_timeout: float = 60.0) -> None:
        """Load on, every request failing; waits for the page's notification if ``page``."""
        before = len(self.page_notices())
        self._fault("error_rate", 1.0)
        self._load_on.set()
        if page:
            self.wait_until(lambda: any(n.status == "firing" for n in self.page_notices()[before:]),
                       page_timeout, "the page was not notified")

    def stop_alertmanager(self) -> None:
        assert self.alertmanager is not None
        self.alertmanager.stop()

    def _stop_alertmanager(self) -> None:  # the one running now (it may have been restarted)
        if self.alertmanager is not None:
            self.alertmanager.stop()

    def restart_alertmanager(self) -> None:
        """Alertmanager again on its port and storage, as a restarted one would be."""
        assert self.alertmanager is not None and self._alertmanager_config is not None
        binary = alertmanager.alertmanager_binary()
        assert binary is not None
        port = int(self.alertmanager.url.rsplit(":", 1)[1])
        self.alertmanager = alertmanager.start_alertmanager(
            binary, self.workdir / "am", self._alertmanager_config, port=port)

    def _fault(self, kind: str, value: float) -> None:
        assert self.reference is not None
        resp = httpx.post(f"{self.reference.url}/admin/faults", timeout=10.0,
                          headers={"Authorization": f"Bearer {self.admin_token}"},
                          json={"kind": kind, "value": value, "duration_seconds": 600})
        resp.raise_for_status()

    def _clear_faults(self) -> None:
        assert self.reference is not None
        httpx.delete(f"{self.reference.url}/admin/faults", timeout=10.0,
                     headers={"Authorization": f"Bearer {self.admin_token}"}
                     ).raise_for_status()

    def wait_until(self, condition: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise ScenarioError(f"{what} within {timeout:g} s; replica logs in "
                                    f"{self.workdir}")
            time.sleep(0.05)


def summary(trials: list[Trial]) -> dict[str, float]:
    times = [t.failover_seconds for t in trials]
    return {"trials": len(trials), "failover_median_s": statistics.median(times),
            "failover_max_s": max(times), "pages_lost": sum(t.lost for t in trials),
            "notifications_duplicated": sum(t.duplicated for t in trials)}


@contextlib.contextmanager
def failover_stack(workdir: Path, postgres_url: str) -> Iterator[FailoverStack]:
    with FailoverStack(workdir, postgres_url) as stack:
        yield stack


__all__ = ["FailoverStack", "ScenarioError", "Trial", "failover_stack", "summary"]
