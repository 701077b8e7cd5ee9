"""Live reload with 1,000 SLOs: time to apply, and alerts neither re-sent nor lost.

    python -m bench.reload [--slos 1000] [--reloads 7] [--evaluation-interval 5]

A real `inferwatch serve` (child process) with N availability SLOs (99% over 30 days) in ten
native SLO files, over a SQLite store written beforehand: two targets, 10 requests per 15 s
scrape from an hour ago to an hour ahead (the evaluator reads closed minutes only); on
``burning`` half of them time out, on ``calm`` none. Half the SLOs select ``burning`` (50x
their budget: every window pages, 4 alerts each), half ``calm``. A real Alertmanager receives
the alerts; the monitor resends every hour only, so Alertmanager's ``updatedAt`` of an alert
moves only if the monitor posts it again.

Once all the burning SLOs' alerts are active in Alertmanager, each round edits one burning SLO
(``slo-0000``: its objective toggles between 99.5% and 99%, still burning) and times
``POST /-/reload`` (the client's wall time, and the ``seconds`` the service reports: read the
11 files, parse the edited one, validate, plan, swap); then as many rounds rewrite every file
with a new comment (all parsed again, no spec changed: every SLO keeps its state). After the
rounds and two more evaluation rounds, every alert Alertmanager had must still be active with
the same startsAt and updatedAt: none lost, none re-sent (the edited SLO's included: its
evaluator state is rebuilt, its alerts in the book are not).

Printed: median and max of both times, the evaluation round time (from the service's
/metrics), and the cores other processes used (the service's and Alertmanager's own CPU
excluded).
"""

from __future__ import annotations

import argparse
import math
import os
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.cpu_meter import _system_busy_seconds
from monitor.alerting.alertmanager import SyncAlertmanagerClient
from monitor.collect.snapshot import Snapshot, TargetState, series_key
from monitor.store import open_store
from monitor.store.db import TargetInfo

FILES = 10
SCRAPE_SECONDS = 15.0
REQUESTS = series_key("gen_ai_server_requests_total", {"model": "tiny", "finish_reason": "stop"})
ERRORS = series_key("gen_ai_server_request_errors_total",
                    {"model": "tiny", "error_type": "timeout"})


def slo_yaml(i: int, objective: float) -> str:
    target = "burning" if i % 2 == 0 else "calm"
    return (f"  - {{name: slo-{i:04d}, objective: {objective}, window: 30d, "
            f"sli: {{kind: availability}}, selector: {{target: {target}}}}}\n")


def write_slos(workdir: Path, n: int, edited: dict[int, float], revision: int = 0) -> None:
    """The SLO files; ``revision`` is written as a comment in every file (a new revision
    rewrites them all without changing any spec)."""
    per_file = math.ceil(n / FILES)
    for f in range(FILES):
        lines = [slo_yaml(i, edited.get(i, 0.99))
                 for i in range(f * per_file, min(n, (f + 1) * per_file))]
        (workdir / f"slos-{f}.yaml").write_text(f"# revision {revision}\nslos:\n"
                                                 + "".join(lines))


def write_config(workdir: Path, alertmanager_url: str, interval: float) -> Path:
    config = workdir / "inferwatch.yaml"
    files = ", ".join(f"slos-{f}.yaml" for f in range(FILES))
    config.write_text(
        f'store: {{url: "sqlite:///{workdir / "store.db"}"}}\nslos: [{files}]\n'
        f"alerting: {{evaluation_interval_seconds: {interval}, settle_seconds: 1, "
        f"resend_seconds: 3600, alertmanager_urls: ['{alertmanager_url}']}}\n"
        "anomaly: {enabled: false}\ntargets: []\n")
    return config


def fill_store(workdir: Path) -> None:
    store = open_store(f"sqlite:///{workdir / 'store.db'}")
    try:
        store.migrate()
        end = math.floor(time.time() / 60) * 60 + 3600
        ends = [end - k * SCRAPE_SECONDS for k in range(2 * 240)][::-1]
        for target, errors in (("burning", 5.0), ("calm", 0.0)):
            store.register_target(TargetInfo(target, "http://127.0.0.1:9/metrics", "auto",
                                             {"model": "tiny"}))
            store.write([Snapshot(target, t - SCRAPE_SECONDS, t, TargetState.UP,
                                  counters={REQUESTS: 10.0, ERRORS: errors}) for t in ends])
    finally:
        store.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc), 0 if unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def active_alerts(am: SyncAlertmanagerClient) -> dict[str, tuple[Any, Any]]:
    """fingerprint -> (startsAt, updatedAt) of the alerts Alertmanager has active."""
    return {a.fingerprint: (a.alert.starts_at, a.updated_at) for a in am.list_alerts()
            if not a.alert.is_resolved()}


def wait_for(probe: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.5)
    raise RuntimeError(f"{what}: not within {timeout:.0f} s")


def metric(url: str, name: str) -> float:
    for line in httpx.get(f"{url}/metrics", timeout=30).text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return math.nan


def run(workdir: Path, alertmanager_url: str, num_slos: int, num_reloads: int,
        interval: float) -> dict[str, Any]:
    fill_store(workdir)
    write_slos(workdir, num_slos, {})
    config = write_config(workdir, alertmanager_url, interval)
    token = secrets.token_hex(16)
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor.cli", "--log-level", "WARNING", "serve", "--config",
         str(config), "--port", "0", "--token", token],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    am = SyncAlertmanagerClient(alertmanager_url, timeout=30)
    try:
        assert proc.stdout is not None
        url = ""
        while not url:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("inferwatch serve exited at start")
            if "listening on " in line:
                url = line.split("listening on ", 1)[1].split()[0]
        expected = 4 * len(range(0, num_slos, 2))
        began = time.monotonic()
        before = wait_for(lambda: (a := active_alerts(am)) and len(a) == expected and a,
                          600, f"{expected} alerts active in Alertmanager")
        first_seconds = time.monotonic() - began
        system0, own0 = _system_busy_seconds(), time.process_time()
        served0, wall0 = cpu_seconds(proc.pid), time.perf_counter()
        timings: dict[str, tuple[list[float], list[float]]] = {}
        headers = {"Authorization": f"Bearer {token}"}
        objective = 0.99
        for phase in ("one SLO edited", "every file rewritten, no spec changed"):
            client_seconds, server_seconds = timings.setdefault(phase, ([], []))
            for k in range(num_reloads):
                if phase.startswith("one"):
                    objective = 0.995 if k % 2 == 0 else 0.99
                    write_slos(workdir, num_slos, {0: objective})
                    expected_changed = ["slo-0000"]
                else:
                    write_slos(workdir, num_slos, {0: objective}, revision=k + 1)
                    expected_changed = []
                t0 = time.perf_counter()
                response = httpx.post(f"{url}/-/reload", headers=headers, timeout=120)
                client_seconds.append(time.perf_counter() - t0)
                body = response.json()
                if response.status_code != 200:
                    raise RuntimeError(f"reload failed: {body}")
                if body["changes"]["slos"]["changed"] != expected_changed:
                    raise RuntimeError(f"unexpected changes: {body['changes']}")
                server_seconds.append(body["seconds"])
                time.sleep(0.5)
        rounds = metric(url, "inferwatch_evaluation_duration_seconds_count")
        wait_for(lambda: metric(url, "inferwatch_evaluation_duration_seconds_count")
                 >= rounds + 2, 20 * interval + 120, "two evaluation rounds after the reloads")
        after = active_alerts(am)
        system1, own1 = _system_busy_seconds(), time.process_time()
        served1, wall1 = cpu_seconds(proc.pid), time.perf_counter()
        others = None
        if system0 is not None and system1 is not None:
            others = max(0.0, ((system1 - system0) - (own1 - own0) - (served1 - served0))
                         / (wall1 - wall0))
        eval_sum = metric(url, "inferwatch_evaluation_duration_seconds_sum")
        eval_count = metric(url, "inferwatch_evaluation_duration_seconds_count")
    finally:
        am.close()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
    return {
        "slos": num_slos, "reloads": num_reloads, "alerts": len(before),
        "first_alerts_seconds": first_seconds,
        "timings": timings,
        "lost": sorted(set(before) - set(after)),
        "resent": sorted(fp for fp in before if fp in after and after[fp] != before[fp]),
        "new": sorted(set(after) - set(before)),
        "mean_evaluation_seconds": eval_sum / eval_count if eval_count else math.nan,
        "others_cores": others,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slos", type=int, default=1000)
    parser.add_argument("--reloads", type=int, default=7)
    parser.add_argument("--evaluation-interval", type=float, default=5.0)
    args = parser.parse_args()
    from tests.monitor.alertmanager_fixture import running_alertmanager

    with tempfile.TemporaryDirectory() as tmp, running_alertmanager(Path(tmp)) as am:
        result = run(Path(tmp), am.url, args.slos, args.reloads, args.evaluation_interval)
    print(f"{result['slos']} SLOs in {FILES} files, {result['alerts']} alerts firing in "
          f"Alertmanager (first all active after {result['first_alerts_seconds']:.1f} s); "
          f"evaluation every {args.evaluation_interval:g} s, mean round "
          f"{result['mean_evaluation_seconds']:.2f} s")
    for phase, (client, server) in result["timings"].items():
        print(f"{result['reloads']} reloads, {phase}: POST /-/reload answered in median "
              f"{statistics.median(client) * 1000:.0f} ms (max {max(client) * 1000:.0f} ms); "
              f"service-side read+validate+apply median "
              f"{statistics.median(server) * 1000:.0f} ms (max {max(server) * 1000:.0f} ms)")
    ok = not (result["lost"] or result["resent"] or result["new"])
    print(f"alerts after the reloads: {len(result['lost'])} lost, {len(result['resent'])} "
          f"re-sent, {len(result['new'])} new -> {'PASS' if ok else 'FAIL'}")
    others = result["others_cores"]
    print(f"others: {'n/a' if others is None else f'{others:.2f}'} cores"
          + (" (high: figures may be slowed)" if others is not None and others > 0.2 else ""))
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
