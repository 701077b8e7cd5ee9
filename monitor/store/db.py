"""Opening the store: an engine per URL (SQLite file or PostgreSQL), migrations, the Store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Connection, Engine, create_engine, event, select, text
from sqlalchemy.engine import make_url

from monitor.collect.snapshot import Snapshot
from monitor.store.ids import IdCache, dialect_insert, ensure_targets
from monitor.store.models import RAW_RESOLUTION, Target
from monitor.store.overlap import OverlapGuard
from monitor.store.retention import RetentionPolicy, apply_retention
from monitor.store.rollup import rollup
from monitor.store.writes import IMMEDIATE, write_snapshots, write_transaction

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
DEFAULT_CONNECT_TIMEOUT_SECONDS = 10.0
DEFAULT_BUSY_TIMEOUT_SECONDS = 10.0
# Scrapes of a closed bucket can still be in flight; a later one only costs a redo.
DEFAULT_LATENESS_SECONDS = 30.0
DEFAULT_RETENTION = RetentionPolicy()
# Replicas starting together migrate one after the other (a transaction-level advisory lock).
_MIGRATION_LOCK_KEY = 0x696E666572776D  # "inferwm"


class SchemaTooNew(RuntimeError):
    """The database was migrated by a newer inferwatch than this one."""


@dataclass(frozen=True, slots=True)
class TargetInfo:
    name: str
    url: str | None = None
    engine: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)


class Store:
    """The monitor's database. Create with ``open_store``; ``migrate()`` before first use."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.ids = IdCache()
        self.overlaps = OverlapGuard()  # refuses snapshots overlapping stored ones

    def migrate(self) -> None:
        """Upgrade the schema to the newest Alembic revision (a no-op when it is there).
        SchemaTooNew if the database is at a revision this code does not know: a newer
        inferwatch migrated it, and this one must not write to a schema it does not know."""
        config = alembic_config()
        with self.engine.connect() as conn:
            conn.execution_options(**{IMMEDIATE: True})
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                                 {"key": _MIGRATION_LOCK_KEY})
                _refuse_newer(conn, ScriptDirectory.from_config(config))
                config.attributes["connection"] = conn
                command.upgrade(config, "head")

    def write(self, snapshots: Sequence[Snapshot]) -> None:
        """Store raw snapshots; writing one again replaces it (idempotent). One that overlaps
        another stored snapshot of its target is not written (monitor/store/overlap.py)."""
        staged = self.ids.copy()
        with write_transaction(self.engine) as conn:
            ensure_targets(conn, staged, {s.target for s in snapshots})
            kept, ends = self.overlaps.admit(conn, staged, snapshots)
            write_snapshots(conn, staged, kept, RAW_RESOLUTION)
        self.ids.adopt(staged)
        self.overlaps.adopt(ends)

    def register_target(self, info: TargetInfo) -> None:
        """Create or update a target's description (the labels selectors match)."""
        values = {"url": info.url, "engine": info.engine, "labels": dict(info.labels)}
        with write_transaction(self.engine) as conn:
            stmt = dialect_insert(conn, Target).values(name=info.name, **values)
            conn.execute(stmt.on_conflict_do_update(index_elements=["name"], set_=values))

    def targets(self) -> list[TargetInfo]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(Target.name, Target.url, Target.engine, Target.labels)
                                .order_by(Target.name))
            return [TargetInfo(name, url, engine, labels or {})
                    for name, url, engine, labels in rows]

    def rollup(self, now: float, *,
               lateness_seconds: float = DEFAULT_LATENESS_SECONDS) -> dict[int, int]:
        """Roll up every bucket closed by ``now - lateness_seconds`` (buckets written per
        resolution). Idempotent; run it every minute or so."""
        return rollup(self.engine, self.ids, now, lateness_seconds)

    def apply_retention(self, now: float,
                        policy: RetentionPolicy = DEFAULT_RETENTION) -> dict[int, int]:
        """Delete what is past the policy (intervals deleted per resolution)."""
        return apply_retention(self.engine, now, policy)

    def close(self) -> None:
        self.engine.dispose()


def _refuse_newer(conn: Connection, scripts: ScriptDirectory) -> None:
    ours = ", ".join(scripts.get_heads())
    for revision in MigrationContext.configure(conn).get_current_heads():
        try:
            known = scripts.get_revision(revision)
        except CommandError:
            known = None
        if known is None:
            raise SchemaTooNew(f"the database schema is at revision {revision}, newer than this "
                               f"inferwatch's {ours}: upgrade this replica before starting it")


def alembic_config(url: str | None = None) -> Config:
    """Alembic configuration of the store's migrations (no alembic.ini needed)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def shown_url(url: str) -> str:
    """A store URL for messages: without its password."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not even a URL: the config check names it
        return url


def open_store(url: str, *, connect_timeout_seconds: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
               busy_timeout_seconds: float = DEFAULT_BUSY_TIMEOUT_SECONDS) -> Store:
    """``sqlite:///path/to/file.db`` (the embedded default) or ``postgresql+psycopg://...``."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return Store(_sqlite_engine(url, busy_timeout_seconds))
    if parsed.get_backend_name() == "postgresql":
        engine = create_engine(url, pool_pre_ping=True,
                               connect_args={"connect_timeout": int(connect_timeout_seconds)})
        return Store(engine)
    raise ValueError(f"unsupported database URL {parsed.render_as_string(hide_password=True)!r}:"
                     " use sqlite:///path or postgresql+psycopg://user@host/db")


def sqlite_path(url: str) -> Path | None:
    """The database file of a SQLite store URL, absolute (a relative one is the process's
    working directory's, as SQLite reads it); None for an in-memory database or another
    backend."""
    parsed = make_url(url)
    database = parsed.database
    if (parsed.get_backend_name() != "sqlite" or database in (None, "", ":memory:")
            or parsed.query.get("mode") == "memory"):
        return None
    if parsed.query.get("uri") == "true" and database.startswith("file:"):  # file:path
        database = database.removeprefix("file:")
        if database in ("", ":memory:"):
            return None
    return Path(database).resolve()


def _sqlite_engine(url: str, busy_timeout_seconds: float) -> Engine:
    engine = create_engine(url)
    in_memory = sqlite_path(url) is None

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control from the sqlite3 module (it would skip BEGIN before
        # SELECT and DDL); the "begin" hook below emits it instead.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        if not in_memory:
            # WAL: readers (API, queries) never block the collector's writes, nor it them.
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")  # durable at checkpoints under WAL
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_seconds * 1000)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(IMMEDIATE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine
