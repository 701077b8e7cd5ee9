"""Per-request events in the store: appended in batches by the gateway's store sink
(``monitor/gateway/store_sink.py``), read back for exact SLIs (``request_sli.py``), pruned by
retention (``retention.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

from sqlalchemy import ColumnElement, Connection, Engine, delete, insert, select

from monitor.store.models import RequestEventRecord
from monitor.store.writes import write_transaction


@dataclass(frozen=True, slots=True)
class RequestEventRow:
    """One judged request; the fields are the columns of ``request_events`` (seconds)."""

    at: float  # arrival, unix seconds
    model: str
    tenant: str
    slo_class: str
    outcome: str
    status: int
    good: bool
    ttft_seconds: float | None = None
    first_content_seconds: float | None = None
    tpot_seconds: float | None = None
    max_itl_seconds: float | None = None
    e2e_seconds: float | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    target_ttft_seconds: float | None = None
    target_itl_seconds: float | None = None
    # vLLM's per-request metrics (--enable-per-request-metrics): queue_time_ms (queued ->
    # scheduled) and time_to_first_token_ms, which despite its name runs from scheduled to
    # the first token: the prefill, not a TTFT. Client TTFT - both = frontend and network.
    engine_queue_seconds: float | None = None
    engine_ttft_seconds: float | None = None


FIELDS = tuple(f.name for f in fields(RequestEventRow))
_COLUMNS = tuple(getattr(RequestEventRecord, name) for name in FIELDS)


@dataclass(frozen=True, slots=True)
class RequestFilter:
    """Which events a read selects: ``start <= at < end`` and exact label matches."""

    start: float | None = None
    end: float | None = None
    model: str | None = None
    tenant: str | None = None
    slo_class: str | None = None

    def clauses(self) -> list[ColumnElement[bool]]:
        found: list[ColumnElement[bool]] = []
        if self.start is not None:
            found.append(RequestEventRecord.at >= self.start)
        if self.end is not None:
            found.append(RequestEventRecord.at < self.end)
        for name in ("model", "tenant", "slo_class"):
            if (value := getattr(self, name)) is not None:
                found.append(getattr(RequestEventRecord, name) == value)
        return found


def insert_request_events(conn: Connection, events: Sequence[RequestEventRow]) -> None:
    """Append ``events`` (one executemany) in the caller's transaction."""
    if events:
        conn.execute(insert(RequestEventRecord), [asdict(e) for e in events])


def write_request_events(engine: Engine, events: Sequence[RequestEventRow]) -> None:
    with write_transaction(engine) as conn:
        insert_request_events(conn, events)


def read_request_events(engine: Engine, where: RequestFilter) -> list[RequestEventRow]:
    """Every event ``where`` selects, oldest first."""
    query = (select(*_COLUMNS).where(*where.clauses())
             .order_by(RequestEventRecord.at, RequestEventRecord.id))
    with engine.connect() as conn:
        return [RequestEventRow(*row) for row in conn.execute(query)]


def distinct_request_labels(engine: Engine, label: str, where: RequestFilter) -> list[str]:
    """The values of ``label`` (model, tenant or slo_class) among the events ``where`` selects,
    sorted (one DISTINCT query, not the rows)."""
    if label not in ("model", "tenant", "slo_class"):
        raise ValueError(f"label one of model, tenant, slo_class, not {label!r}")
    column = getattr(RequestEventRecord, label)
    query = select(column).where(*where.clauses()).distinct().order_by(column)
    with engine.connect() as conn:
        return [value for value, in conn.execute(query)]


def distinct_request_label_sets(engine: Engine, labels: Sequence[str],
                                where: RequestFilter) -> list[dict[str, str]]:
    """The distinct values of ``labels`` together (model, tenant, slo_class) among the events
    ``where`` selects, sorted (one DISTINCT query)."""
    if bad := [k for k in labels if k not in ("model", "tenant", "slo_class")]:
        raise ValueError(f"labels among model, tenant, slo_class, not {bad}")
    columns = [getattr(RequestEventRecord, k) for k in labels]
    query = select(*columns).where(*where.clauses()).distinct().order_by(*columns)
    with engine.connect() as conn:
        return [dict(zip(labels, row, strict=True)) for row in conn.execute(query)]


def prune_request_events(conn: Connection, cutoff: float) -> int:
    """Delete the events that arrived at or before ``cutoff``; returns how many."""
    return conn.execute(delete(RequestEventRecord)
                        .where(RequestEventRecord.at <= cutoff)).rowcount
