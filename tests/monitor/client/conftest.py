"""The API of tests/monitor/api/conftest.py (two targets, two SLOs, evaluated once) on a
port-0 uvicorn server, plus bench runs: three sweeps (one failed) stored as the service stores
them, and a stored-data canary run through the API."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from monitor.store.runs import finish_run, start_run
from tests.monitor.api.conftest import TOKEN, Api, served_api
from tests.monitor.slo.test_propose import sweep_document


@dataclass
class Served:
    api: Api
    sweep_ids: list[str]     # done, done, failed
    canary_id: str


def start_stored_canary(api: Api) -> str:
    end = api.now // 60 * 60 - 120
    r = httpx.post(f"{api.url}/api/v1/canaries", timeout=10,
                   headers={"Authorization": f"Bearer {TOKEN}"},
                   json={"mode": "stored", "baseline_target": "ref-1", "canary_target": "ref-0",
                         "start": end - 1800, "end": end, "step_seconds": 60})
    assert r.status_code == 202, r.text
    run_id: str = r.json()["id"]
    deadline = time.monotonic() + 60
    while httpx.get(f"{api.url}/api/v1/canaries/{run_id}", timeout=10).json()["status"] \
            == "running":
        assert time.monotonic() < deadline, "the canary is still running"
        time.sleep(0.1)
    return run_id


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with served_api(tmp_path_factory.mktemp("api")) as api:
        engine = api.state.store.engine
        sweep_ids = []
        for name, error in [("nightly", None), ("weekly", None), ("broken", "refused")]:
            run_id = start_run(engine, "sweep", name, {"model": "tiny"})
            finish_run(engine, run_id, None if error else sweep_document(), error=error)
            sweep_ids.append(run_id)
        yield Served(api, sweep_ids, start_stored_canary(api))
