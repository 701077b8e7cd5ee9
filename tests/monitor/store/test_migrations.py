from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from monitor.store import Selector, Store, open_store, window
from monitor.service import cli as serve_cli
from monitor.store.db import SchemaTooNew
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
        assert conn.scalars(text("SELECT version_num FROM alembic_version")).all() == ["0005"]


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


def test_a_database_migrated_by_a_newer_inferwatch_is_refused_with_both_revisions(
        store: Store) -> None:
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(SchemaTooNew, match=r"the database schema is at revision 9999, newer "
                                           r"than this inferwatch's 0\d+: upgrade this replica "
                                           r"before starting it"):
        store.migrate()
    with store.engine.connect() as conn:  # and nothing was touched
        assert conn.scalars(text("SELECT version_num FROM alembic_version")).all() == ["9999"]


def test_serve_refuses_to_start_on_a_newer_schema_with_status_2(
        database: Database, store: Store, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    config = tmp_path / "inferwatch.yaml"
    config.write_text("targets: []\n", encoding="utf-8")
    args = argparse.Namespace(config=str(config), store=database.url, host="127.0.0.1",
                              port=0, token=None)
    assert serve_cli.run(args) == 2
    assert "newer than this inferwatch's" in capsys.readouterr().err
