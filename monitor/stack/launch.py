"""Starting the demo's stack in order, each part's stop registered as soon as it runs:
reference server, alert receiver, Alertmanager, monitor, Prometheus.

Every stop goes on the caller's ExitStack the moment its part is up, so a failure or a Ctrl-C
half-way through the start still stops exactly what was started, in reverse order.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from monitor.slo.spec import Slo
from monitor.stack import alertmanager, prometheus
from monitor.stack.configs import MonitorFiles, TARGET, write_rules, write_slos
from monitor.stack.monitor_service import start_monitor
from monitor.stack.processes import Service
from monitor.stack.receiver import AlertReceiver, NoticeCallback
from monitor.stack.reference import start_reference_server

PROMETHEUS_INTERVAL_SECONDS = 5.0
# A batch cap the demo's load fills to a visible share (the default, 64, would read 1-2%).
MAX_NUM_SEQS = 8
# Prometheus' alerts carry this label, so that they can be told from the monitor's own
# (same names, same labels otherwise: two evaluation paths, one truth).
EVALUATOR_LABEL = {"evaluator": "prometheus"}

Say = Callable[[str], None]


@dataclass(frozen=True)
class StackOptions:
    model: str = "tiny"
    prometheus: bool = True
    alertmanager: bool = True
    startup_timeout_seconds: float = 120.0
    pid_file: Path | None = None


@dataclass(frozen=True)
class Stack:
    workdir: Path
    reference: Service
    admin_token: str
    receiver: AlertReceiver
    monitor: Service
    alertmanager: Service | None
    prometheus: Service | None
    slos: tuple[Slo, ...]
    model: str
    target: str = TARGET

    def services(self) -> list[Service]:
        """The child processes, in the order they started."""
        return [s for s in (self.reference, self.alertmanager, self.monitor, self.prometheus)
                if s is not None]


def launch(options: StackOptions, workdir: Path, cleanup: contextlib.ExitStack, say: Say,
           on_notice: NoticeCallback, check: Callable[[], None] = lambda: None) -> Stack:
    """Start everything; raises ChildError (or KeyboardInterrupt) with what started stopped
    by ``cleanup`` when the caller closes it. ``check()`` runs after each part (it raises
    KeyboardInterrupt when a signal came meanwhile)."""
    token = secrets.token_urlsafe(16)
    say(f"starting the reference server (model {options.model}, CPU) ...")
    child, url = start_reference_server(
        ["--model", options.model, "--max-num-seqs", str(MAX_NUM_SEQS),
         "--enable-fault-injection", f"--admin-token={token}"],  # "=": it may start with "-"
        options.startup_timeout_seconds, log_path=workdir / "reference-server.log")
    reference = _started(Service("reference server", url, child), cleanup, options, say)
    check()
    receiver = AlertReceiver(on_notice).start()
    cleanup.callback(receiver.stop)
    am = _alertmanager(options, workdir, receiver, cleanup, say)
    check()
    slos_path, slos = write_slos(workdir)
    files = MonitorFiles(workdir, url, slos_path, am.url if am else receiver.url)
    say("starting the monitor (inferwatch serve, SQLite store) ...")
    monitor = _started(start_monitor(files.write, log_path=workdir / "monitor.log",
                                     timeout=options.startup_timeout_seconds),
                       cleanup, options, say)
    check()
    prom = _prometheus(options, workdir, slos, {TARGET: url, "inferwatch": monitor.url},
                       am.url if am else receiver.url, cleanup, say)
    check()
    return Stack(workdir, reference, token, receiver, monitor, am, prom, tuple(slos),
                 options.model)


def _started(service: Service, cleanup: contextlib.ExitStack, options: StackOptions,
             say: Say) -> Service:
    def stop() -> None:
        service.stop()
        say(f"  {service.name}: stopped (pid {service.child.pid})")

    cleanup.callback(stop)
    if options.pid_file is not None:  # for whoever checks that nothing is left running
        with options.pid_file.open("a", encoding="utf-8") as out:
            out.write(f"{service.child.pid} {service.name}\n")
    return service


def _alertmanager(options: StackOptions, workdir: Path, receiver: AlertReceiver,
                  cleanup: contextlib.ExitStack, say: Say) -> Service | None:
    binary = alertmanager.alertmanager_binary() if options.alertmanager else None
    if binary is None:
        why = "--no-alertmanager" if not options.alertmanager else "no binary found"
        say(f"Alertmanager: {why}; the built-in receiver takes the alerts and logs them")
        return None
    say(f"starting Alertmanager ({binary}) ...")
    config = alertmanager.webhook_config(receiver.webhook_url)
    service = alertmanager.start_alertmanager(binary, workdir / "alertmanager", config)
    return _started(service, cleanup, options, say)


def _prometheus(options: StackOptions, workdir: Path, slos: list[Slo], jobs: dict[str, str],
                alerts_url: str, cleanup: contextlib.ExitStack, say: Say) -> Service | None:
    """Prometheus scraping ``jobs``, its alerts to ``alerts_url`` (an Alertmanager or the
    built-in receiver, which speaks the same v2 API)."""
    binary = prometheus.prometheus_binary() if options.prometheus else None
    if binary is None:
        say("Prometheus: " + ("--no-prometheus" if not options.prometheus
                              else "no binary found") + "; the monitor evaluates the SLOs alone")
        return None
    say(f"starting Prometheus ({binary}) with the SLOs' generated rules ...")
    directory = workdir / "prometheus"
    rules = write_rules(directory, slos)
    config = prometheus.prometheus_config(
        jobs, interval_seconds=PROMETHEUS_INTERVAL_SECONDS, rule_files=[str(rules)],
        alertmanager_url=alerts_url, external_labels=EVALUATOR_LABEL)
    service = prometheus.start_prometheus(binary, directory, config)
    return _started(service, cleanup, options, say)
