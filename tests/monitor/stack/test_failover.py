"""Issue 19 end to end: two `inferwatch serve` replicas on one PostgreSQL database, a page
firing through a real Alertmanager, the active replica killed with SIGKILL. The standby takes
over within two evaluation intervals, the page is notified exactly once, and its resolve
arrives once the fault is cleared (monitor/stack/failover.py runs the trial)."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.stack.alertmanager import alertmanager_binary
from monitor.stack.failover import EVALUATION_SECONDS, FailoverStack
from tests.integration import unavailable
from tests.monitor.store.databases import Database


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.waits
@pytest.mark.timeout(240)
def test_killing_the_active_replica_loses_no_page_and_repeats_none(
        postgres: Database, tmp_path: Path) -> None:
    if alertmanager_binary() is None:
        unavailable("no Alertmanager binary (prometheus-alertmanager)")
    with FailoverStack(tmp_path, postgres.url) as stack:
        first = stack.active()
        standby = next(r for r in stack.replicas if r is not first)
        ha = stack.status(standby)
        assert ha is not None and ha["role"] == "standby"
        assert ha["active_replica_id"] == first.replica_id == stack.status(first)["replica_id"]

        trial = stack.run_trial(say=print)

        assert trial.killed == first.replica_id
        assert trial.failover_seconds <= 2 * EVALUATION_SECONDS
        assert (trial.firing, trial.resolved, trial.others) == (1, 1, 0)
        # The killed replica came back as a standby of the new active.
        assert stack.active() is standby
        assert stack.status(first)["role"] == "standby"
