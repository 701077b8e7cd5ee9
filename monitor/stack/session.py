"""One demo run: start the stack, run the load with its fault while showing what the monitor
sees, then stop everything in reverse order and say what happened."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from monitor.loadgen.runner import Progress
from monitor.stack.display import AlertChange, Console, clock, describe_alert
from monitor.stack.driver import Driver
from monitor.stack.faults import FaultPlan
from monitor.stack.launch import Stack, StackOptions, launch
from monitor.stack.load import LoadShape
from monitor.stack.processes import ChildError
from monitor.stack.receiver import Notice
from monitor.stack.signals import Interrupts


_VERBS = {"firing": "fired", "resolved": "resolved"}


@dataclass(frozen=True)
class DemoOptions:
    stack: StackOptions
    shape: LoadShape
    fault: FaultPlan | None
    seed: int = 0
    keep_dir: bool = False
    refresh_seconds: float = 2.0


@dataclass
class _Clock:
    """Seconds since the load started (0 before it)."""

    started_at: float | None = None

    def elapsed(self) -> float:
        return 0.0 if self.started_at is None else time.monotonic() - self.started_at


@dataclass
class _Tally:
    notices: list[Notice] = field(default_factory=list)


def run_demo(options: DemoOptions, console: Console) -> int:
    """The whole demo; its exit status (0, 1 when a part failed, 128 + signal)."""
    workdir = Path(tempfile.mkdtemp(prefix="inferwatch-demo-"))
    interrupts = Interrupts(lambda: console.event("still stopping, one moment ..."))
    timer, tally = _Clock(), _Tally()

    def on_notice(notice: Notice) -> None:
        tally.notices.append(notice)
        console.event(format_notice(timer.elapsed(), notice))

    cleanup = contextlib.ExitStack()
    if not options.keep_dir:
        cleanup.callback(shutil.rmtree, workdir, ignore_errors=True)
    status = 0
    with interrupts.installed():
        try:
            stack = launch(options.stack, workdir, cleanup, console.event, on_notice,
                           interrupts.raise_if_received)
            print_urls(console, stack, options)
            driver = Driver(stack, options.shape, options.fault, console, interrupts,
                            options.seed, options.refresh_seconds)
            timer.started_at = time.monotonic()
            status = driver.run(timer.started_at)
            print_summary(console, driver.load_progress, driver.alerts, tally.notices,
                          timer.elapsed())
        except KeyboardInterrupt:
            pass  # the signal is in interrupts.received
        except ChildError as exc:
            console.event(f"inferwatch demo: {exc}")
            status = 1
        finally:
            interrupts.stopping = True
            console.close()
            _shut_down(console, cleanup, workdir, options.keep_dir)
    return interrupts.exit_status or status


def _shut_down(console: Console, cleanup: contextlib.ExitStack, workdir: Path,
               keep_dir: bool) -> None:
    console.event("stopping what the demo started, last started first ...")
    try:
        cleanup.close()
    except Exception as exc:  # one part failing to stop must not hide the others
        console.event(f"while stopping: {type(exc).__name__}: {exc}")
    where = f"; files kept in {workdir}" if keep_dir else ""
    console.event(f"all stopped, nothing left running{where}")


def format_notice(elapsed_seconds: float, notice: Notice) -> str:
    """What reached the receiver, and how: Alertmanager's webhook, or a direct post (from the
    monitor or Prometheus, when the receiver stands in for Alertmanager)."""
    who = "Prometheus" if notice.labels.get("evaluator") == "prometheus" else "the monitor"
    if notice.source == "alertmanager":
        return (f"[{clock(elapsed_seconds)}] NOTIFIED {notice.describe()} by Alertmanager "
                f"(evaluated by {who})")
    return (f"[{clock(elapsed_seconds)}] RECEIVED {notice.describe()} from {who} "
            "(built-in receiver)")


def print_urls(console: Console, stack: Stack, options: DemoOptions) -> None:
    api = stack.monitor.url
    lines = ["", "inferwatch demo: the whole stack on this machine "
             "(Ctrl-C stops it and everything it started)",
             f"  reference server  {stack.reference.url}  (OpenAI API, /metrics; "
             "fault injection on)",
             f"  monitor API       {api}/docs"]
    for i, slo in enumerate(stack.slos):
        label = "SLO report (HTML)" if i == 0 else ""
        lines.append(f"  {label:<18}{api}/api/v1/slos/{slo.name}/report?format=html")
    if stack.prometheus:
        lines.append(f"  Prometheus        {stack.prometheus.url}/alerts  (SLO rules at /rules)")
    if stack.alertmanager:
        lines.append(f"  Alertmanager      {stack.alertmanager.url}")
    else:
        lines.append(f"  alert receiver    {stack.receiver.url}  (built-in; logs alerts here)")
    kept = "kept at the end" if options.keep_dir else "removed at the end"
    lines.append(f"  work dir          {stack.workdir}  (configs, store, logs; {kept})")
    shape = options.shape
    lines.append(f"load: open-loop Poisson, {shape.low_rps:g} -> {shape.peak_rps:g} -> "
                 f"{shape.low_rps:g} req/s over {shape.duration_seconds:g} s")
    if options.fault:
        lines.append(f"fault: {options.fault.describe()} at {clock(options.fault.at_seconds)}")
    lines += ["budget left: the share of each SLO's 7-day error budget not spent, judged on "
              "the demo's minutes of traffic (so one fault spends it many times over)", ""]
    for line in lines:
        console.event(line)


def print_summary(console: Console, progress: Progress,
                  alerts: dict[str, list[tuple[float, AlertChange]]],
                  notices: list[Notice], elapsed_seconds: float) -> None:
    console.close()
    console.event(f"summary after {clock(elapsed_seconds)}: {progress.sent} requests sent, "
                  f"{progress.done - progress.failed} answered, {progress.failed} failed, "
                  f"{progress.in_flight} in flight at the end")
    if not alerts:
        console.event("  no alert fired")
    for changes in alerts.values():
        labels = {**changes[0][1].alert.get("labels", {}),
                  "alertname": changes[0][1].alert.get("alertname", "?")}
        story = ", ".join(f"{_VERBS[c.status]} at {clock(t)}" for t, c in changes)
        console.event(f"  {describe_alert(labels)}: {story}")
    if notices:
        console.event(f"  {len(notices)} notifications received (fired and resolved)")
