"""Bench runs in the store: load runs, sweeps and canary comparisons, started and finished.

A run is written when it starts (status ``running``) and again when it ends, so a crash
leaves a ``running`` row behind rather than nothing, and the API can list runs in flight.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, RowMapping, func, insert, select, update

from monitor.json_safe import json_safe
from monitor.store.models import BenchRun
from monitor.store.writes import write_transaction


@dataclass(frozen=True, slots=True)
class RunRow:
    id: str
    kind: str
    name: str
    status: str
    started_at: float
    finished_at: float | None
    config: dict[str, Any]
    result: dict[str, Any] | None
    artifacts: dict[str, str]
    error: str | None


def start_run(engine: Engine, kind: str, name: str, config: Mapping[str, Any],
              artifacts: Mapping[str, str] | None = None) -> str:
    run_id = str(uuid.uuid4())
    with write_transaction(engine, fenced=True) as conn:
        conn.execute(insert(BenchRun).values(
            id=run_id, kind=kind, name=name, status="running", started_at=time.time(),
            finished_at=None, config=json_safe(config), result=None,
            artifacts=dict(artifacts or {}), error=None))
    return run_id


def finish_run(engine: Engine, run_id: str, result: Mapping[str, Any] | None,
               error: str | None = None, artifacts: Mapping[str, str] | None = None) -> None:
    values: dict[str, Any] = {"status": "failed" if error else "done",
                              "finished_at": time.time(), "error": error,
                              "result": json_safe(result) if result is not None else None}
    if artifacts is not None:
        values["artifacts"] = dict(artifacts)
    with write_transaction(engine, fenced=True) as conn:
        conn.execute(update(BenchRun).where(BenchRun.id == run_id).values(**values))


def list_runs(engine: Engine, kind: str | None = None, limit: int = 100,
              offset: int = 0) -> list[RunRow]:
    query = select(*_COLUMNS).order_by(BenchRun.started_at.desc()).limit(limit).offset(offset)
    if kind is not None:
        query = query.where(BenchRun.kind == kind)
    with engine.connect() as conn:
        return [_row(r) for r in conn.execute(query).mappings()]


def get_run(engine: Engine, run_id: str) -> RunRow | None:
    with engine.connect() as conn:
        row = conn.execute(select(*_COLUMNS).where(BenchRun.id == run_id)).mappings().first()
    return _row(row) if row is not None else None


_COLUMNS = (BenchRun.id, BenchRun.kind, BenchRun.name, BenchRun.status, BenchRun.started_at,
            BenchRun.finished_at, BenchRun.config, BenchRun.result, BenchRun.artifacts,
            BenchRun.error)


def _row(r: RowMapping) -> RunRow:
    def loaded(v: Any) -> Any:
        return json.loads(v) if isinstance(v, str) else v
    return RunRow(r["id"], r["kind"], r["name"], r["status"], r["started_at"],
                  r["finished_at"], loaded(r["config"]), loaded(r["result"]),
                  loaded(r["artifacts"]), r["error"])


def count_runs(engine: Engine, kind: str | None = None) -> int:
    query = select(func.count()).select_from(BenchRun)
    if kind is not None:
        query = query.where(BenchRun.kind == kind)
    with engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def fail_unfinished(engine: Engine, reason: str) -> int:
    """Mark runs still ``running`` as failed with ``reason`` (at start: their process is
    gone); returns how many."""
    with write_transaction(engine, fenced=True) as conn:
        result = conn.execute(update(BenchRun).where(BenchRun.status == "running").values(
            status="failed", finished_at=time.time(), error=reason))
    return int(result.rowcount or 0)


def find_sweep(engine: Engine, reference: str) -> RunRow | None:
    """A finished sweep by its id, else the latest finished sweep named ``reference``."""
    row = get_run(engine, reference)
    if row is not None:
        return row if row.kind == "sweep" and row.status == "done" else None
    query = (select(*_COLUMNS).where(BenchRun.kind == "sweep", BenchRun.status == "done",
                                     BenchRun.name == reference)
             .order_by(BenchRun.finished_at.desc()).limit(1))
    with engine.connect() as conn:
        found = conn.execute(query).mappings().first()
    return _row(found) if found is not None else None
