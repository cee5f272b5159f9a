"""Every audit store format, filled with `records.entries()`; PostgreSQL on the real test
server (skipped only when its binaries are absent)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.readers.jsonl import JsonlReader
from proxy.observability.audit.readers.postgres import PostgresReader
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.postgres_writer import PostgresSink
from tests.proxy.viewer.records import entries, write


@pytest.fixture
def store_paths(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path, entries())


@pytest.fixture(params=["sqlite", "jsonl", "postgres"])
def reader(
    request: pytest.FixtureRequest, store_paths: tuple[Path, Path]
) -> Iterator[SqliteReader | JsonlReader | PostgresReader]:
    db, lines = store_paths
    opened: SqliteReader | JsonlReader | PostgresReader
    if request.param == "postgres":
        dsn: str = request.getfixturevalue("fresh_dsn")
        builder = RecordBuilder(Redactor.build())
        sink = PostgresSink(dsn)
        sink.write_many([builder.build(e) for e in entries()])
        sink.close()
        opened = PostgresReader(dsn)
    elif request.param == "sqlite":
        opened = SqliteReader(str(db))
    else:
        opened = JsonlReader(str(lines))
    yield opened
    opened.close()
