"""From a measured capacity to a warning before the page: sweep, propose, watch a ramp.

On the reference server (tiny model, 8 batch slots, every engine step slowed by 100 ms with
its latency fault, so that its capacity is set by slots and step time rather than by a CPU
other processes share; 20-60 prompt and 16 output tokens a request), with the monitor
watching throughout:

1. a rate sweep finds the max rate at which 99% of requests meet TTFT <= 1 s and
   TPOT <= 250 ms, recorded in a SQLite store with its capacity per dimension;
2. ``inferwatch slo propose`` turns it into an SLO file (checked with the project's loader);
3. ``inferwatch serve`` watches the server with those SLOs and the target's
   ``capacity: {sweep: NAME}``, scraping every second;
4. open-loop Poisson load steps through fractions of the measured capacity while the monitor
   is polled: its headroom, and when the headroom ticket (InferwatchCapacityHeadroomLow,
   below 20% for 10 s) and the latency SLO's burn-rate page fire.

It prints per ramp step the offered rate, the headroom the monitor reported at the step's end
with its binding dimension, the SLO attainment the load generator measured, and the alerts
firing, then when each alert fired and by how much the warning led the page.

    python -m bench.headroom                                     # about 7 minutes
    python -m bench.headroom --sweep-step 6 --ramp-step 12 --ramp 0.3,0.7,2   # a smoke run
    python -m bench.headroom --step-latency 0   # CPU-bound: noisy on a shared 2-core box
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Final

import httpx

from bench.cpu_meter import BUSY_WARNING_CORES, OtherCpuMeter
from monitor.headroom.config import HEADROOM_ALERT
from monitor.loadgen.metrics import LatencySlo, summarize
from monitor.loadgen.runner import Endpoint, Limits, run_load
from monitor.loadgen.sweep import SweepOptions, sweep
from monitor.loadgen.workload import LengthDist, WorkloadSpec
from monitor.slo.loaders import load_slos
from monitor.slo.propose import ProposeOptions, SweepSource, propose
from monitor.slo.windows import BURN_ALERT
from monitor.stack.reference import reference_server
from monitor.store import open_store
from monitor.store.runs import finish_run, start_run

SWEEP_NAME: Final = "headroom-bench"
_LISTENING: Final = re.compile(r"listening on (http://\S+)")


@dataclass(frozen=True, slots=True)
class BenchOptions:
    server_args: tuple[str, ...] = ("--model", "tiny", "--max-num-seqs", "8")
    input_len: str = "uniform:20-60"
    output_len: str = "fixed:16"
    ttft_seconds: float = 1.0
    tpot_seconds: float = 0.25
    sweep_rates: tuple[float, ...] = (1.0, 2.0, 3.0, 4.0, 6.0)
    sweep_step_seconds: float = 15.0
    refine_steps: int = 2
    ramp: tuple[float, ...] = (0.25, 0.5, 0.7, 0.85, 1.0, 1.25, 1.5, 2.0)   # x the capacity
    ramp_step_seconds: float = 30.0
    warn_below_ratio: float = 0.2
    for_seconds: float = 10.0
    window_seconds: float = 15.0
    seed: int = 1
    # Seconds added to every engine step (the server's latency fault), 0 for none: 0.1 makes
    # a server bound by its batch slots and step time rather than by a CPU that others share.
    step_latency_seconds: float = 0.1
    pin_cpus: bool = False

    def workload(self) -> WorkloadSpec:
        return WorkloadSpec(input_len=LengthDist.parse(self.input_len, "input"),
                            output_len=LengthDist.parse(self.output_len, "output"),
                            chars_per_token=1.0, seed=self.seed)

    def slo(self) -> LatencySlo:
        return LatencySlo(ttft=self.ttft_seconds, tpot=self.tpot_seconds)


@dataclass(frozen=True, slots=True)
class Poll:
    at: float                       # seconds since the ramp began
    rate: float                     # the offered rate then
    headroom: float | None
    binding: str | None
    dimensions: dict[str, float]
    firing: tuple[str, ...]         # "alertname{severity,slo|target}"


@dataclass(frozen=True, slots=True)
class RampStep:
    rate: float
    fraction: float                 # of the measured capacity
    attainment: float | None        # measured by the load generator
    ttft_p99_seconds: float | None
    tpot_p99_seconds: float | None


@dataclass(slots=True)
class Outcome:
    capacity: dict[str, Any]
    steps: list[RampStep] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    ticket_at: float | None = None  # seconds since the ramp began (the alert's fired_at)
    page_at: float | None = None

    def rate_at(self, at: float | None) -> float | None:
        if at is None:
            return None
        before = [p.rate for p in self.polls if p.at <= at]
        return before[-1] if before else None


def run_sweep(url: str, options: BenchOptions, store_url: str) -> str:
    """The sweep, recorded in the store under SWEEP_NAME; its run id."""
    sweep_options = SweepOptions(slo=options.slo(), rates=options.sweep_rates,
                                 step_seconds=options.sweep_step_seconds, warmup_seconds=1.0,
                                 refine_steps=options.refine_steps)
    result = asyncio.run(sweep(Endpoint(url, "tiny"), options.workload(), sweep_options))
    print(result.format(), flush=True)
    store = open_store(store_url)
    try:
        store.migrate()
        run_id = start_run(store.engine, "sweep", SWEEP_NAME, {"url": url, "model": "tiny"})
        finish_run(store.engine, run_id, result.to_json())
    finally:
        store.close()
    return run_id


def write_slos(workdir: Path, ref_url: str, run_id: str, document: dict[str, Any]) -> Path:
    """The SLO file ``inferwatch slo propose`` writes for the sweep, checked with the
    project's own loader."""
    slos = workdir / "proposed-slos.yaml"
    source = SweepSource(f"sweep {run_id} ({SWEEP_NAME}) of tiny at {ref_url}", run_id)
    slos.write_text(propose(document, source, ProposeOptions(name="bench")))
    load_slos(slos)
    return slos


def write_config(workdir: Path, ref_url: str, store_url: str, slos: Path | None,
                 options: BenchOptions) -> Path:
    """The monitor's inferwatch.yaml: the server scraped every second, its capacity the
    latest sweep named SWEEP_NAME, the SLOs of ``slos`` (none before there are any)."""
    config = workdir / "inferwatch.yaml"
    config.write_text(
        f'store: {{url: "{store_url}"}}\nslos: [{slos.name if slos else ""}]\n'
        "anomaly: {enabled: false}\n"
        "alerting: {evaluation_interval_seconds: 1, settle_seconds: 1}\n"
        f"headroom: {{warn_below_ratio: {options.warn_below_ratio}, "
        f"for_seconds: {options.for_seconds}, window_seconds: {options.window_seconds}}}\n"
        f"targets:\n  - {{name: ref, url: '{ref_url}/metrics', scrape_interval_seconds: 1, "
        f"scrape_timeout_seconds: 0.9, capacity: {{sweep: {SWEEP_NAME}}}}}\n")
    return config


@contextmanager
def serving_monitor(config: Path, timeout: float = 90.0) -> Iterator[str]:
    """`inferwatch serve --config CONFIG --port 0` as a child; yield its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor.cli", "--log-level", "WARNING", "serve", "--config",
         str(config), "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True)
    try:
        yield _listening_url(proc, timeout)
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def _listening_url(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    deadline, seen = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line and proc.poll() is not None:
            break
        seen.append(line)
        if match := _LISTENING.search(line):
            return match.group(1)
    raise RuntimeError("inferwatch serve did not start:\n" + "".join(seen))


class Ramp:
    """The load steps, one after the other in a thread of their own; ``rate`` is the one
    being offered now (0 before and after)."""

    def __init__(self, url: str, capacity: float, options: BenchOptions) -> None:
        self.url, self.capacity, self.options = url, capacity, options
        self.rates = [round(capacity * f, 3) for f in options.ramp]
        self.step_seconds = options.ramp_step_seconds
        self.rate = 0.0
        self.steps: list[RampStep] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        endpoint, slo = Endpoint(self.url, "tiny"), self.options.slo()
        for k, rate in enumerate(self.rates):
            self.rate = rate
            workload = self.options.workload()
            limits = Limits(duration_seconds=self.step_seconds, drain_seconds=5.0)
            run = asyncio.run(run_load(endpoint, _reseeded(workload, k).stream(rate), limits,
                                       rate=rate))
            summary = summarize(run, slo=slo)
            ttft, tpot = summary.latency.get("ttft"), summary.latency.get("tpot")
            self.steps.append(RampStep(
                rate, rate / self.capacity, summary.slo_attainment,
                ttft.percentiles.get("p99") if ttft else None,
                tpot.percentiles.get("p99") if tpot else None))
        self.rate = 0.0


def _reseeded(workload: WorkloadSpec, k: int) -> WorkloadSpec:
    return replace(workload, seed=workload.seed + k)


def poll(monitor: str, at: float, rate: float) -> Poll:
    target = httpx.get(f"{monitor}/api/v1/targets/ref", timeout=10).json()
    alerts = httpx.get(f"{monitor}/api/v1/alerts", params={"state": "firing"},
                       timeout=10).json()["items"]
    found = target.get("headroom") or {}
    return Poll(at, rate, found.get("headroom_ratio"), found.get("binding_dimension"),
                {d["dimension"]: d["headroom_ratio"] for d in found.get("dimensions", [])},
                tuple(sorted(_alert_name(a) for a in alerts)))


def _alert_name(alert: dict[str, Any]) -> str:
    labels = alert["labels"]
    what = labels.get("slo") or labels.get("target", "")
    return f"{alert['alertname']}{{{labels.get('severity', '')},{what}}}"


def fired_at(monitor: str, began: float) -> tuple[float | None, float | None]:
    """When the headroom ticket and the first latency SLO page fired (s since ``began``)."""
    alerts = httpx.get(f"{monitor}/api/v1/alerts", timeout=10).json()["items"]

    def first(match: Any) -> float | None:
        times = [a["fired_at"] for a in alerts if a.get("fired_at") and match(a)]
        return min(times) - began if times else None
    ticket = first(lambda a: a["alertname"] == HEADROOM_ALERT)
    page = first(lambda a: a["alertname"] == BURN_ALERT and a["labels"].get("severity") ==
                 "page" and not a["labels"].get("slo", "").endswith("availability"))
    return ticket, page


def watch(ref_url: str, monitor: str, capacity: float, options: BenchOptions) -> Outcome:
    """Ramp the load while polling the monitor every second."""
    ramp = Ramp(ref_url, capacity, options)
    outcome = Outcome({})
    began = time.time()
    ramp.thread.start()
    while ramp.thread.is_alive():
        outcome.polls.append(poll(monitor, time.time() - began, ramp.rate))
        time.sleep(1.0)
    outcome.steps = ramp.steps
    outcome.ticket_at, outcome.page_at = fired_at(monitor, began)
    return outcome


def run_bench(options: BenchOptions, workdir: Path) -> Outcome:
    """Sweep, propose, serve and ramp. With two CPUs or more the reference server runs on
    CPU 1 and everything else (load generator, monitor) on CPU 0, so the monitor's work during
    the ramp does not take capacity the sweep measured without it."""
    store_url = f"sqlite:///{workdir / 'store.db'}"
    with pinned(options.pin_cpus) as server_cpus, \
            reference_server(server_arguments(options), 120.0, server_cpus) as ref_url:
        slow_steps(ref_url, options.step_latency_seconds)
        # The monitor watches during the sweep too, as in production: its own work on this
        # machine is then part of the capacity measured. Into a store of its own, so that the
        # SLOs of the ramp are judged on the ramp's traffic, not on the sweep's overload.
        sweep_dir = workdir / "during-sweep"
        sweep_dir.mkdir()
        watching = write_config(sweep_dir, ref_url, f"sqlite:///{sweep_dir / 'store.db'}",
                                None, options)
        with serving_monitor(watching):
            run_id = run_sweep(ref_url, options, store_url)
        document = _stored_result(store_url, run_id)
        dimensions = document.get("dimensions")
        if not dimensions:
            raise RuntimeError("the sweep found no capacity: lower the sweep rates")
        slos = write_slos(workdir, ref_url, run_id, document)
        with serving_monitor(write_config(workdir, ref_url, store_url, slos, options)
                             ) as monitor:
            outcome = watch(ref_url, monitor, float(dimensions["max_rate"]), options)
    outcome.capacity = dimensions
    return outcome


class OthersMeter:
    """Cores other processes kept busy: system-wide CPU time less this process's and its
    children's (the server and the monitor, counted once they have exited)."""

    def __init__(self) -> None:
        self._meter = OtherCpuMeter()
        self._children = _children_seconds()
        self._began = time.perf_counter()

    def cores(self) -> float | None:
        others = self._meter.cores()
        if others is None:
            return None
        children = (_children_seconds() - self._children) / (time.perf_counter() - self._began)
        return max(0.0, others - children)


def _children_seconds() -> float:
    times = os.times()
    return times.children_user + times.children_system


_ADMIN_TOKEN: Final = "headroom-bench-admin-token"


def server_arguments(options: BenchOptions) -> list[str]:
    extra = (["--enable-fault-injection", f"--admin-token={_ADMIN_TOKEN}"]
             if options.step_latency_seconds > 0 else [])
    return [*options.server_args, *extra]


def slow_steps(url: str, seconds: float) -> None:
    """Add ``seconds`` to every engine step for the next day (nothing when 0)."""
    if seconds <= 0:
        return
    httpx.post(f"{url}/admin/faults", timeout=10, json={
        "kind": "latency", "value": seconds, "duration_seconds": 86400},
        headers={"Authorization": f"Bearer {_ADMIN_TOKEN}"}).raise_for_status()


@contextmanager
def pinned(enabled: bool = True) -> Iterator[set[int] | None]:
    """This process (and the children it starts) on CPU 0 for the duration; yields the CPUs
    left for the server, or None on a one-CPU machine or when not ``enabled``."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2 or not enabled:
        yield None
        return
    os.sched_setaffinity(0, {cpus[0]})
    try:
        yield set(cpus[1:])
    finally:
        os.sched_setaffinity(0, set(cpus))


def _stored_result(store_url: str, run_id: str) -> dict[str, Any]:
    from monitor.store.runs import get_run
    store = open_store(store_url)
    try:
        row = get_run(store.engine, run_id)
    finally:
        store.close()
    assert row is not None and row.result is not None
    return row.result


def format_outcome(outcome: Outcome) -> str:
    capacity = outcome.capacity
    lines = [f"capacity (max rate under the SLO {capacity['max_rate']:.3g} req/s), "
             f"binding: {capacity['binding']} ({capacity['binding_reason']})"]
    lines += [f"  {name}: {value:.4g}" for name, value in capacity["capacity"].items()]
    lines.append(f"{'rate':>7} {'x cap':>6} {'headroom':>9} {'binding now':>26} "
                 f"{'attain':>7} {'ttft p99':>9}  alerts firing (headroom, binding and "
                 "alerts at the step's end)")
    for step in outcome.steps:
        polls = [p for p in outcome.polls if p.rate == step.rate]
        last = polls[-1] if polls else None
        binding = last.binding if last else None
        firing = ", ".join(sorted(set(last.firing))) if last else ""
        lines.append(f"{step.rate:7.3g} {step.fraction:6.2f} "
                     f"{_pct(last.headroom if last else None):>9} "
                     f"{binding or '-':>26} {_pct(step.attainment):>7} "
                     f"{_ms(step.ttft_p99_seconds):>9}  {firing or '-'}")
    lines.append(f"headroom ticket fired at {_at(outcome.ticket_at)} "
                 f"(offered {_rate(outcome.rate_at(outcome.ticket_at))}); latency SLO page at "
                 f"{_at(outcome.page_at)} (offered {_rate(outcome.rate_at(outcome.page_at))})")
    if outcome.ticket_at is not None and outcome.page_at is not None:
        lines.append(f"the warning led the page by {outcome.page_at - outcome.ticket_at:.0f} s")
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return f"{value:.0%}" if value is not None else "-"


def _ms(value: float | None) -> str:
    return f"{value * 1000:.0f} ms" if value is not None else "-"


def _at(value: float | None) -> str:
    return f"{value:.0f} s" if value is not None else "never"


def _rate(value: float | None) -> str:
    return f"{value:.3g} req/s" if value is not None else "-"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = BenchOptions()
    p.add_argument("--sweep-step", type=float, default=defaults.sweep_step_seconds)
    p.add_argument("--ramp-step", type=float, default=defaults.ramp_step_seconds)
    p.add_argument("--ramp", default=",".join(f"{f:g}" for f in defaults.ramp),
                   help="fractions of the measured capacity, one step each")
    p.add_argument("--sweep-rates", default=",".join(f"{r:g}" for r in defaults.sweep_rates))
    p.add_argument("--warn-below", type=float, default=defaults.warn_below_ratio,
                   help="the headroom ticket's threshold")
    p.add_argument("--step-latency", type=float, default=defaults.step_latency_seconds,
                   help="seconds added to every engine step (the server's latency fault)")
    p.add_argument("--pin", action="store_true",
                   help="the server on CPUs 1.., this process and the monitor on CPU 0")
    p.add_argument("--max-num-seqs", type=int, default=8, help="the server's batch slots")
    p.add_argument("--input-len", default=defaults.input_len)
    p.add_argument("--output-len", default=defaults.output_len)
    p.add_argument("--ttft-ms", type=float, default=defaults.ttft_seconds * 1000)
    p.add_argument("--tpot-ms", type=float, default=defaults.tpot_seconds * 1000)
    p.add_argument("--window", type=float, default=defaults.window_seconds,
                   help="seconds of load the headroom is read over")
    p.add_argument("--for", dest="for_seconds", type=float, default=defaults.for_seconds,
                   help="seconds the headroom must stay low before the ticket fires")
    p.add_argument("--out", help="write the outcome as JSON here")
    args = p.parse_args(argv)
    options = BenchOptions(server_args=("--model", "tiny", "--max-num-seqs",
                                        str(args.max_num_seqs)),
                           input_len=args.input_len, output_len=args.output_len,
                           ttft_seconds=args.ttft_ms / 1000, tpot_seconds=args.tpot_ms / 1000,
                           window_seconds=args.window, for_seconds=args.for_seconds,
                           sweep_step_seconds=args.sweep_step,
                           ramp_step_seconds=args.ramp_step,
                           ramp=tuple(float(f) for f in args.ramp.split(",")),
                           sweep_rates=tuple(float(r) for r in args.sweep_rates.split(",")),
                           warn_below_ratio=args.warn_below,
                           step_latency_seconds=args.step_latency, pin_cpus=args.pin)
    meter = OthersMeter()
    with tempfile.TemporaryDirectory(prefix="headroom-bench-") as workdir:
        outcome = run_bench(options, Path(workdir))
    print(format_outcome(outcome))
    others = meter.cores()
    print(f"machine: {os.cpu_count()} CPUs; others (cores kept busy by other processes): "
          + (f"{others:.2f}" if others is not None else "n/a")
          + (" (high: figures are noisy)" if others and others > BUSY_WARNING_CORES else ""))
    if args.out:
        Path(args.out).write_text(json.dumps(asdict(outcome), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
