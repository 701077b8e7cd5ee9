"""Bench runs in the store: started, finished or failed, listed newest first, JSON-safe."""

from __future__ import annotations

import math

from monitor.store import Store
from monitor.store.runs import finish_run, get_run, list_runs, start_run


def test_runs_are_recorded_from_start_to_result(store: Store) -> None:
    first = start_run(store.engine, "sweep", "night", {"rate": math.inf, "rates": [1.0, 2.0]})
    running = get_run(store.engine, first)
    assert running is not None and running.status == "running" and running.result is None
    assert running.config == {"rate": None, "rates": [1.0, 2.0]}   # inf is not JSON
    finish_run(store.engine, first, {"max_rate_under_slo": 3.5, "knee": math.nan},
               artifacts={"plot": "sweep.png"})
    second = start_run(store.engine, "canary", "v2", {})
    finish_run(store.engine, second, None, error="ConnectError: refused")
    done = get_run(store.engine, first)
    assert done is not None and done.status == "done" and done.finished_at is not None
    assert done.result == {"max_rate_under_slo": 3.5, "knee": None}
    assert done.artifacts == {"plot": "sweep.png"}
    failed = get_run(store.engine, second)
    assert failed is not None and failed.status == "failed" and failed.error
    assert [r.id for r in list_runs(store.engine)] == [second, first]
    assert [r.id for r in list_runs(store.engine, "sweep")] == [first]
    assert [r.id for r in list_runs(store.engine, limit=1, offset=1)] == [first]
    assert get_run(store.engine, "no-such-run") is None
