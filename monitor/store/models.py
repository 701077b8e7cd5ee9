"""Tables of the store (SQLAlchemy 2.0 declarative models).

Layout, and why:

* ``targets``, ``series`` and ``histogram_bounds`` are small dimension tables; data rows refer
  to them by integer id. A series key (``monitor.collect.snapshot.series_key``) names a metric
  and its labels but not the target, so one series row serves every target that exposes it.
* ``intervals`` holds one row per target-interval at each resolution (0 = raw scrape interval,
  60 and 3600 = rollups): its [start, end), its state (up / first / down) and the error of a
  down interval. A down interval has a row here and no value rows: an explicit gap.
* Values live in narrow per-series tables, one per kind, keyed (target, resolution, series,
  end). The queries that matter read one metric of one or many targets over a time range
  ("TTFT p99 of pool X over 30 days at 1 h step"); with the series before the time in the key,
  that is one contiguous range per (target, series) instead of a scan over every series of
  every interval. A whole-snapshot read (window, rollup) passes the list of series ids, which
  turns into one range seek per series. On SQLite these tables are WITHOUT ROWID, so the key
  is the clustered b-tree and a range read touches consecutive pages.
* Histogram bucket counts are one blob per row (non-cumulative, leading and trailing zero
  buckets trimmed, ``first_bucket`` the index of the first count kept, in the narrowest exact
  type: see ``histograms.py``). Bounds repeat for every row, so rows refer to
  ``histogram_bounds`` instead; a bounds change (an engine upgrade) gets a new bounds row and
  old rows keep theirs.
* No foreign key from values to ``intervals``: (target, resolution, end) is not a prefix of
  the value keys, so SQLite would check or cascade each parent delete with a scan. Writes
  and retention touch both in one transaction instead.

Times are unix seconds as double precision, compared exactly: a retried write of the same
snapshot carries the same floats, and rollup bucket ends are whole multiples of the bucket.
Value columns are nullable because SQLite stores NaN as NULL; readers map NULL back to NaN.
"""

from __future__ import annotations

import enum
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    CheckConstraint,
    Double,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Deterministic constraint names, so Alembic revisions can name what they alter or drop.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

RAW_RESOLUTION = 0  # the collector's own intervals, whatever their length
ROLLUP_RESOLUTIONS = (60, 3600)

# Clustered key on SQLite; ignored by other dialects.
_CLUSTERED: dict[str, Any] = {"sqlite_with_rowid": False}


class SeriesKind(enum.StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Target(Base):
    """A monitored inference server; created on its first snapshot, described by the collector."""

    __tablename__ = "targets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    url: Mapped[str | None] = mapped_column(Text)
    engine: Mapped[str | None] = mapped_column(String(64))
    labels: Mapped[dict[str, str]] = mapped_column(JSON)


class Series(Base):
    __tablename__ = "series"
    __table_args__ = (
        CheckConstraint("kind IN ('counter', 'gauge', 'histogram')", name="kind"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(Text, unique=True)
    name: Mapped[str] = mapped_column(String(200), index=True)
    labels: Mapped[dict[str, str]] = mapped_column(JSON)
    kind: Mapped[str] = mapped_column(String(16))


class HistogramBounds(Base):
    __tablename__ = "histogram_bounds"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # sha256 of the JSON bounds: a unique index on the list itself could pass PostgreSQL's
    # btree entry limit for long bucket lists.
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    bounds: Mapped[list[float]] = mapped_column(JSON)


class Interval(Base):
    __tablename__ = "intervals"
    __table_args__ = (
        CheckConstraint("state IN ('up', 'first', 'down')", name="state"),
        _CLUSTERED,
    )

    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), primary_key=True)
    resolution: Mapped[int] = mapped_column(Integer, primary_key=True)
    end_time: Mapped[float] = mapped_column(Double, primary_key=True)
    start_time: Mapped[float] = mapped_column(Double)
    state: Mapped[str] = mapped_column(String(8))
    error: Mapped[str | None] = mapped_column(Text)


class CounterValue(Base):
    __tablename__ = "counter_values"
    __table_args__ = (_CLUSTERED,)

    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), primary_key=True)
    resolution: Mapped[int] = mapped_column(Integer, primary_key=True)
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"), primary_key=True)
    end_time: Mapped[float] = mapped_column(Double, primary_key=True)
    increase: Mapped[float | None] = mapped_column(Double)


class GaugeValue(Base):
    __tablename__ = "gauge_values"
    __table_args__ = (_CLUSTERED,)

    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), primary_key=True)
    resolution: Mapped[int] = mapped_column(Integer, primary_key=True)
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"), primary_key=True)
    end_time: Mapped[float] = mapped_column(Double, primary_key=True)
    last: Mapped[float | None] = mapped_column(Double)
    total: Mapped[float | None] = mapped_column(Double)
    num_readings: Mapped[int] = mapped_column(Integer)
    minimum: Mapped[float | None] = mapped_column(Double)
    maximum: Mapped[float | None] = mapped_column(Double)


class HistogramValue(Base):
    __tablename__ = "histogram_values"
    __table_args__ = (_CLUSTERED,)

    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), primary_key=True)
    resolution: Mapped[int] = mapped_column(Integer, primary_key=True)
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"), primary_key=True)
    end_time: Mapped[float] = mapped_column(Double, primary_key=True)
    bounds_id: Mapped[int] = mapped_column(ForeignKey("histogram_bounds.id"))
    sum: Mapped[float | None] = mapped_column(Double)
    count: Mapped[float | None] = mapped_column(Double)
    first_bucket: Mapped[int] = mapped_column(Integer)
    counts: Mapped[bytes] = mapped_column(LargeBinary)


class RollupWatermark(Base):
    """Rollups at ``resolution`` are complete for every bucket ending at or before
    ``watermark``; a late raw write moves it back so the next rollup redoes those buckets."""

    __tablename__ = "rollup_watermarks"

    resolution: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    watermark: Mapped[float] = mapped_column(Double)


ValueTable = type[CounterValue] | type[GaugeValue] | type[HistogramValue]


class AlertRecord(Base):
    """One alert the monitor raised (pending, firing, or resolved and still being
    re-announced), kept so that a restart neither loses a firing alert nor pages twice:
    ``fired_at`` is the startsAt sent to Alertmanager, stable across restarts."""

    __tablename__ = "alerts"
    __table_args__ = (
        CheckConstraint("state IN ('pending', 'firing', 'resolved')", name="state"),
    )

    fingerprint: Mapped[str] = mapped_column(String(64), primary_key=True)
    labels: Mapped[dict[str, str]] = mapped_column(JSON)
    annotations: Mapped[dict[str, str]] = mapped_column(JSON)
    state: Mapped[str] = mapped_column(String(16))
    active_at: Mapped[float] = mapped_column(Double)
    fired_at: Mapped[float | None] = mapped_column(Double)
    resolved_at: Mapped[float | None] = mapped_column(Double)
    last_sent_at: Mapped[float | None] = mapped_column(Double)
    value: Mapped[float | None] = mapped_column(Double)


class BenchRun(Base):
    """A load-generation run, sweep or canary comparison and its result (the summary JSON;
    per-request records stay in the run's JSONL file, named in ``artifacts``)."""

    __tablename__ = "bench_runs"
    __table_args__ = (
        CheckConstraint("kind IN ('run', 'sweep', 'canary')", name="kind"),
        CheckConstraint("status IN ('running', 'done', 'failed')", name="status"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), index=True)
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[float] = mapped_column(Double, index=True)
    finished_at: Mapped[float | None] = mapped_column(Double)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    artifacts: Mapped[dict[str, str]] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)


class AlertEvent(Base):
    """One change of an alert's state, kept as history (the ``alerts`` table holds only the
    current state): ``state`` is the state entered, ``inactive`` for a pending alert that
    stopped holding before it fired. ``fired_at`` is the episode's startsAt (on its firing and
    resolved events), so an episode pairs up even when its firing event is out of a range.
    ``slo`` is the alert's ``slo`` label, a column of its own for the history's filter."""

    __tablename__ = "alert_events"
    __table_args__ = (
        CheckConstraint("state IN ('pending', 'firing', 'resolved', 'inactive')",
                        name="state"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[float] = mapped_column(Double, index=True)
    fingerprint: Mapped[str] = mapped_column(String(64))
    alertname: Mapped[str] = mapped_column(String(200), index=True)
    slo: Mapped[str | None] = mapped_column(String(200), index=True)
    state: Mapped[str] = mapped_column(String(16))
    previous_state: Mapped[str | None] = mapped_column(String(16))
    fired_at: Mapped[float | None] = mapped_column(Double)
    value: Mapped[float | None] = mapped_column(Double)
    labels: Mapped[dict[str, str]] = mapped_column(JSON)
    annotations: Mapped[dict[str, str]] = mapped_column(JSON)


class RequestEventRecord(Base):
    """One request judged by the gateway (``monitor/gateway``), kept for exact percentiles
    and goodput over any window. ``at`` is the arrival, unix seconds. Latencies are seconds,
    NULL where the request had none (no token: no TTFT; fewer than two tokens: no TPOT).
    ``tenant`` is the gateway's raw identity (a salted hash of the API key, or the tenant
    header's value), before the cardinality budget: an event row is no metric series.
    ``engine_*`` come from vLLM's per-request ``metrics`` object where the engine sends one."""

    __tablename__ = "request_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[float] = mapped_column(Double, index=True)
    model: Mapped[str] = mapped_column(String(200))
    tenant: Mapped[str] = mapped_column(String(64), index=True)
    slo_class: Mapped[str] = mapped_column(String(64))
    outcome: Mapped[str] = mapped_column(String(16))
    status: Mapped[int] = mapped_column(Integer)
    good: Mapped[bool] = mapped_column(Boolean)
    ttft_seconds: Mapped[float | None] = mapped_column(Double)
    first_content_seconds: Mapped[float | None] = mapped_column(Double)
    tpot_seconds: Mapped[float | None] = mapped_column(Double)
    max_itl_seconds: Mapped[float | None] = mapped_column(Double)
    e2e_seconds: Mapped[float | None] = mapped_column(Double)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    output_tokens: Mapped[int | None] = mapped_column(Integer)
    target_ttft_seconds: Mapped[float | None] = mapped_column(Double)  # the class's targets
    target_itl_seconds: Mapped[float | None] = mapped_column(Double)
    engine_queue_seconds: Mapped[float | None] = mapped_column(Double)
    engine_ttft_seconds: Mapped[float | None] = mapped_column(Double)
