"""Failover of `inferwatch serve` replicas: kill -9 of the active, N times.

    python -m bench.failover [--trials 20] [--postgres-url postgresql+psycopg://...]

Two replicas on a fresh PostgreSQL database (created on the server of ``--postgres-url``,
default $INFERWATCH_TEST_POSTGRES_URL, and dropped at the end), a reference server under load,
a real Alertmanager notifying a webhook receiver (monitor/stack/failover.py, the scenario of
tests/monitor/stack/test_failover.py). Each trial: fault -> page notified -> SIGKILL of the
active -> the standby reports active (the failover time) -> fault cleared -> resolve notified;
the killed replica is then started again as a standby. Prints each trial, then the failover
time (median, max), pages lost and notifications duplicated over all trials.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from monitor.stack.failover import (
    EVALUATION_SECONDS,
    POLL_SECONDS,
    SCRAPE_SECONDS,
    FailoverStack,
    Trial,
    summary,
)

POSTGRES_ENV = "INFERWATCH_TEST_POSTGRES_URL"


def _admin(url: str, statement: str) -> None:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(statement))
    finally:
        engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--postgres-url", default=os.environ.get(POSTGRES_ENV),
                        help=f"a server where the role may create databases (${POSTGRES_ENV})")
    parser.add_argument("--json", type=Path, default=None, help="also write results here")
    args = parser.parse_args()
    if not args.postgres_url:
        parser.error(f"give --postgres-url or ${POSTGRES_ENV}")
    name = f"inferwatch_failover_{uuid.uuid4().hex[:12]}"
    url = make_url(args.postgres_url).set(database=name).render_as_string(hide_password=False)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; scrape {SCRAPE_SECONDS:g} s, evaluation "
          f"{EVALUATION_SECONDS:g} s, leader poll {POLL_SECONDS:g} s", flush=True)
    _admin(args.postgres_url, f'CREATE DATABASE "{name}"')
    trials: list[Trial] = []
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="inferwatch-failover-") as tmp, \
                FailoverStack(Path(tmp), url) as stack:
            for i in range(1, args.trials + 1):
                trial = stack.run_trial()
                trials.append(trial)
                print(f"trial {i:>2}: killed {trial.killed}, failover "
                      f"{trial.failover_seconds * 1000:.0f} ms, page notified firing "
                      f"{trial.firing}x resolved {trial.resolved}x, other notifications "
                      f"{trial.others}; load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        _admin(args.postgres_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    if not trials:
        return 1
    result = summary(trials)
    print(f"{len(trials)} trials in {time.monotonic() - started:.0f} s: failover median "
          f"{result['failover_median_s'] * 1000:.0f} ms, max {result['failover_max_s'] * 1000:.0f}"
          f" ms; pages lost {result['pages_lost']:g}, notifications duplicated "
          f"{result['notifications_duplicated']:g}")
    if args.json:
        args.json.write_text(json.dumps({**result, "trials_detail": [
            dataclasses.asdict(t) for t in trials]}, indent=2))
    return 0 if result["pages_lost"] == 0 and result["notifications_duplicated"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
