"""Store fixtures for every monitor test, on SQLite (a temporary file) and a real PostgreSQL.

PostgreSQL runs when INFERWATCH_TEST_POSTGRES_URL names a server where the role may create
databases (e.g. postgresql+psycopg://inferwatch:inferwatch@127.0.0.1/inferwatch); each test
gets a fresh database, dropped afterwards. Without the variable those tests skip, unless
INFERWATCH_REQUIRE_INTEGRATION=1 (CI), where they fail.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ProgrammingError

from tests.integration import unavailable

from monitor.store import Store
from tests.monitor.store.databases import Database

POSTGRES_URL_ENV = "INFERWATCH_TEST_POSTGRES_URL"


def drop_database(database: Database, name: str, attempts: int = 20) -> None:
    """DROP ... WITH (FORCE); an autovacuum worker in the database can refuse the role the
    termination (where it lacks pg_signal_backend): it ends within moments, so try again."""
    for attempt in range(attempts):
        try:
            database.admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        except ProgrammingError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.25)


@contextmanager
def fresh_postgres(why: str) -> Iterator[Database]:
    """A new database on the PostgreSQL of $INFERWATCH_TEST_POSTGRES_URL, dropped afterwards;
    skips (or fails, in CI) saying ``why`` without one."""
    admin_url = os.environ.get(POSTGRES_URL_ENV)
    if not admin_url:
        unavailable(f"{why} {POSTGRES_URL_ENV}=postgresql+psycopg://USER:PASSWORD@HOST/DB "
                    "(a role that may create databases)")
    name = f"inferwatch_test_{uuid.uuid4().hex[:16]}"
    database = Database(make_url(admin_url).set(database=name)
                        .render_as_string(hide_password=False), "postgresql", admin_url)
    database.admin(f'CREATE DATABASE "{name}"')
    try:
        yield database
    finally:
        drop_database(database, name)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        yield Database(f"sqlite:///{tmp_path / 'store.db'}", "sqlite")
        return
    with fresh_postgres("PostgreSQL tests need") as database:
        yield database


@pytest.fixture
def store(database: Database) -> Iterator[Store]:
    store = database.open()
    store.migrate()
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def postgres() -> Iterator[Database]:
    """A fresh PostgreSQL database (no SQLite twin): for what only PostgreSQL does, such as
    several replicas on one store."""
    with fresh_postgres("this test needs PostgreSQL:") as database:
        yield database
