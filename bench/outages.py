"""Outages under `inferwatch serve` replicas in the middle of an incident: Alertmanager down
(5 minutes by default, the issue's case) and PostgreSQL restarted.

    python -m bench.outages [--alertmanager-down 300] [--postgres-down 10] [--json out.json]

Two replicas on a private PostgreSQL server this bench starts (monitor/stack/postgres.py), a
reference server under load, a real Alertmanager notifying a webhook receiver: the scenarios of
tests/monitor/stack/test_outages.py (monitor/stack/outages.py) with outages as long as given
(0 skips one). Prints each trial: the outage, the recovery (PostgreSQL back -> one active;
Alertmanager back -> the page notified), the page's notifications, the snapshots of the
PostgreSQL outage stored.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

from monitor.stack.failover import FailoverStack
from monitor.stack.outages import OutageTrial, alertmanager_down, restart_postgres
from monitor.stack.postgres import PrivatePostgres


def _line(name: str, trial: OutageTrial) -> str:
    return (f"{name}: down {trial.down_seconds:.0f} s, recovered {trial.recovered_seconds:.2f}"
            f" s after it returned; page notified firing {trial.firing}x resolved "
            f"{trial.resolved}x, other notifications {trial.others}; snapshots of the outage "
            f"stored {trial.snapshots_in_outage}; replicas alive {trial.replicas_alive}; "
            f"pages lost {trial.lost}, duplicated {trial.duplicated}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--alertmanager-down", type=float, default=300.0, metavar="SECONDS")
    parser.add_argument("--postgres-down", type=float, default=10.0, metavar="SECONDS")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}", flush=True)
    results: dict[str, OutageTrial] = {}
    with PrivatePostgres() as server, \
            tempfile.TemporaryDirectory(prefix="inferwatch-outages-") as tmp, \
            FailoverStack(Path(tmp), server.url) as stack:
        if args.alertmanager_down > 0:
            results["alertmanager"] = alertmanager_down(stack, args.alertmanager_down,
                                                        say=print)
            print(_line("Alertmanager down", results["alertmanager"]), flush=True)
        if args.postgres_down > 0:
            results["postgres"] = restart_postgres(stack, server, args.postgres_down,
                                                   say=print)
            print(_line("PostgreSQL restarted", results["postgres"]), flush=True)
    if args.json:
        args.json.write_text(json.dumps({k: dataclasses.asdict(v) for k, v in results.items()},
                                        indent=2))
    failed = [k for k, t in results.items() if t.lost or t.duplicated or t.replicas_alive != 2]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
