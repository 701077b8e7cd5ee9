"""A database for one test: a SQLite file or a fresh PostgreSQL database, and outages."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from monitor.store import Store, open_store


@dataclass
class Database:
    url: str
    backend: str
    admin_url: str | None = None  # PostgreSQL: the server's own database, to manage ours

    @property
    def name(self) -> str:
        return make_url(self.url).database or ""

    def open(self) -> Store:
        # A short busy timeout: the SQLite outage test holds the write lock on purpose.
        return open_store(self.url, busy_timeout_seconds=0.2, connect_timeout_seconds=2)

    @contextmanager
    def outage(self) -> Iterator[None]:
        """The database refuses work until the block ends: SQLite locked by another
        writer, PostgreSQL refusing connections with the existing ones killed."""
        if self.backend == "sqlite":
            with _sqlite_locked(Path(make_url(self.url).database or "")):
                yield
            return
        self.admin(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false',
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    f"WHERE datname = '{self.name}'")
        try:
            yield
        finally:
            self.admin(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')

    def admin(self, *statements: str) -> None:
        assert self.admin_url is not None
        engine = create_engine(self.admin_url, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                for statement in statements:
                    conn.execute(text(statement))
        finally:
            engine.dispose()


@contextmanager
def _sqlite_locked(path: Path) -> Iterator[None]:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        yield
        conn.execute("ROLLBACK")
    finally:
        conn.close()


