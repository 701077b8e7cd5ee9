"""A private PostgreSQL server for one test or bench: initdb into a temporary directory, a free
loopback port, its unix socket in that directory, trust authentication. It can be stopped,
started and restarted under the processes that use it, and a session can be killed
(``terminate``), which a shared server used by other people's tests cannot allow.

initdb refuses to run as root: as root the server runs as the ``postgres`` user (``runuser``),
in a directory under /tmp that user owns (pytest's tmp_path is private to root).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from sqlalchemy import create_engine, text

from exporters.sockets import free_port

SERVER_USER: Final = "postgres"
DATABASE: Final = "inferwatch"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries here, or no user to run them as."""


def server_bindir() -> Path | None:
    """The directory of initdb and pg_ctl (the newest Debian version, else PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
                   key=lambda p: int(Path(p).parent.parent.name)
                   if Path(p).parent.parent.name.isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl else None


class PrivatePostgres:
    """``start()`` creates and starts the server with one database, ``DATABASE``; ``close()``
    stops it and removes its files."""

    def __init__(self, *, port: int | None = None) -> None:
        bindir = server_bindir()
        if bindir is None:
            raise PostgresUnavailable("no PostgreSQL server binaries (initdb, pg_ctl)")
        self.bindir = bindir
        self.port = port or free_port()
        self._as_root = os.geteuid() == 0
        if self._as_root:
            try:
                self._owner = pwd.getpwnam(SERVER_USER)
            except KeyError as exc:
                raise PostgresUnavailable(f"running as root and no {SERVER_USER} user") from exc
        self.root = Path(tempfile.mkdtemp(prefix="inferwatch-pg-"))
        self.datadir = self.root / "data"

    @property
    def url(self) -> str:
        """The SQLAlchemy URL of ``DATABASE``, over TCP (keepalives and timeouts apply)."""
        return f"postgresql+psycopg://{self._user}@127.0.0.1:{self.port}/{DATABASE}"

    @property
    def _user(self) -> str:
        return SERVER_USER if self._as_root else pwd.getpwuid(os.geteuid()).pw_name

    def start(self) -> PrivatePostgres:
        if self._as_root:
            os.chown(self.root, self._owner.pw_uid, self._owner.pw_gid)
        self._run("initdb", "-D", str(self.datadir), "-U", self._user, "--auth=trust",
                  "--no-sync", "-E", "UTF8")
        with (self.datadir / "postgresql.conf").open("a") as conf:
            conf.write(f"listen_addresses = '127.0.0.1'\nport = {self.port}\n"
                       f"unix_socket_directories = '{self.root}'\nfsync = off\n"
                       "max_connections = 50\n")
        self.start_server()
        self.sql(f'CREATE DATABASE "{DATABASE}"', database="postgres")
        return self

    def start_server(self) -> None:
        self._pg_ctl("start", "-w", "-l", str(self.root / "server.log"))

    def stop_server(self) -> None:
        """Fast shutdown: every session is ended, as in a real restart."""
        self._pg_ctl("stop", "-w", "-m", "fast")

    def restart(self, down_seconds: float = 0.0) -> None:
        """Stop, stay down ``down_seconds``, start again."""
        self.stop_server()
        time.sleep(down_seconds)
        self.start_server()

    def terminate(self, application_name: str) -> int:
        """End the sessions named ``application_name`` (as a dead network would); how many."""
        rows = self.sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE application_name = :name", name=application_name)
        return int(rows[0][0]) if rows else 0

    def sql(self, statement: str, *, database: str = DATABASE,
            **params: object) -> list[tuple[Any, ...]]:
        url = f"postgresql+psycopg://{self._user}@127.0.0.1:{self.port}/{database}"
        engine = create_engine(url, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                result = conn.execute(text(statement), params)
                return [tuple(r) for r in result] if result.returns_rows else []
        finally:
            engine.dispose()

    def close(self) -> None:
        if (self.datadir / "postmaster.pid").exists():
            subprocess.run(self._argv("pg_ctl", "-D", str(self.datadir), "stop", "-m",
                                      "immediate"), capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> PrivatePostgres:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", "-D", str(self.datadir), *args)

    def _run(self, program: str, *args: str) -> None:
        done = subprocess.run(self._argv(program, *args), capture_output=True, text=True,
                              check=False, timeout=120)
        if done.returncode != 0:
            raise PostgresUnavailable(f"{program} {' '.join(args[:2])} failed: "
                                      f"{(done.stderr or done.stdout).strip()[-500:]}")

    def _argv(self, program: str, *args: str) -> list[str]:
        argv = [str(self.bindir / program), *args]
        return ["runuser", "-u", SERVER_USER, "--", *argv] if self._as_root else argv


__all__ = ["DATABASE", "PostgresUnavailable", "PrivatePostgres", "server_bindir"]
