"""A real, throwaway PostgreSQL server for the tests: a cluster in a temp dir, on loopback.

Debian's `postgresql` package provides the binaries (.ci/run installs it). The server
refuses to run as root, so under root the cluster belongs to the `postgres` user and
its commands run through `runuser`. Each test gets its own database (`fresh_dsn`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

HOST = "127.0.0.1"
START_S = 30


def binaries() -> Path | None:
    """The folder holding initdb and pg_ctl, or None when PostgreSQL is not installed."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


class PgServer:
    """One cluster: start, stop (fast or immediate, as a crash), start again, same port."""

    def __init__(self, bin_dir: Path, root: Path) -> None:
        self.bin = bin_dir
        self.data = root / "data"
        self.port = _free_port()
        self.user = "postgres" if os.geteuid() == 0 else None
        if self.user:
            entry = pwd.getpwnam(self.user)
            os.chown(root, entry.pw_uid, entry.pw_gid)
        self.root = root
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "curator", "-E", "UTF8")
        conf = (
            f"listen_addresses = '{HOST}'\nport = {self.port}\n"
            f"unix_socket_directories = '{root}'\nfsync = off\nmax_connections = 60\n"
        )
        with open(self.data / "postgresql.conf", "a", encoding="utf-8") as handle:
            handle.write(conf)

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if self.user:
            command = ["runuser", "-u", self.user, "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=START_S + 30)

    def start(self) -> None:
        log = str(self.root / "server.log")
        self._run("pg_ctl", "-D", str(self.data), "-l", log, "-w", "-t", str(START_S), "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://curator@{HOST}:{self.port}/{database}"

    def create_database(self) -> str:
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}".encode())
        return self.dsn(name)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    found = binaries()
    if found is None:
        pytest.skip(
            "PostgreSQL binaries (initdb, pg_ctl) are not installed: apt-get install postgresql"
        )
    pytest.importorskip("psycopg", reason="the postgres extra: pip install -e '.[postgres]'")
    root = Path(tempfile.mkdtemp(prefix="curator-pg-"))
    server = PgServer(found, root)
    server.start()
    try:
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):  # a test left it stopped
            server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def fresh_dsn(pg_server: PgServer) -> str:
    """A new, empty database on the shared test server."""
    return pg_server.create_database()
