"""Alembic environment of the store.

``Store.migrate()`` passes its open connection in ``config.attributes["connection"]``. To write
a new revision, autogenerate it against a database at the current head:

    python -c "from alembic import command; from monitor.store.db import alembic_config; \
command.revision(alembic_config('sqlite:///dev.db'), autogenerate=True, message='...')"
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from monitor.store.models import Base


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def _main() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from monitor.store.db import open_store  # a database named by URL: command-line use

    url = context.config.get_main_option("sqlalchemy.url")
    if url is None:
        raise SystemExit("no database: use alembic_config(url) from monitor.store.db")
    store = open_store(url)
    try:
        with store.engine.begin() as conn:
            _run(conn)
    finally:
        store.close()


_main()
