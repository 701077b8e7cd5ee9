from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from monitor.store import Selector, Store, open_store, window
from monitor.store.models import Base
from tests.monitor.store.builders import REQUESTS, T0, up
from tests.monitor.store.databases import Database


def test_the_migration_creates_exactly_the_models(store: Store) -> None:
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_migrating_again_changes_nothing(store: Store) -> None:
    with store.engine.connect() as conn:
        tables_before = sorted(inspect(conn).get_table_names())
    store.migrate()
    with store.engine.connect() as conn:
        assert sorted(inspect(conn).get_table_names()) == tables_before
        assert conn.scalars(text("SELECT version_num FROM alembic_version")).all() == ["0004"]


def test_a_store_reopened_on_the_same_database_sees_what_was_written(
        database: Database, store: Store) -> None:
    store.write([up("a", T0 + 15, requests=7.0)])
    store.close()
    reopened = database.open()
    try:
        reopened.migrate()
        assert window(reopened, Selector("a"), T0, T0 + 15).counters[REQUESTS] == 7.0
        reopened.write([up("a", T0 + 15, requests=7.0)])  # a collector retry after restart
        assert window(reopened, Selector("a"), T0, T0 + 15).counters[REQUESTS] == 7.0
    finally:
        reopened.close()


def test_sqlite_runs_in_wal_mode_with_foreign_keys(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        with store.engine.connect() as conn:
            assert conn.scalar(text("PRAGMA journal_mode")) == "wal"
            assert conn.scalar(text("PRAGMA foreign_keys")) == 1
    finally:
        store.close()


@pytest.mark.parametrize("url", ["mysql://u@h/db", "mongodb://h/db"], ids=["mysql", "mongodb"])
def test_open_store_names_the_supported_urls_for_anything_else(url: str) -> None:
    with pytest.raises(ValueError, match="use sqlite:///path or postgresql"):
        open_store(url)
