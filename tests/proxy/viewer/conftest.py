"""Both audit store formats, filled with `records.entries()`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.observability.audit.readers.jsonl import JsonlReader
from proxy.observability.audit.readers.sqlite import SqliteReader
from tests.proxy.viewer.records import entries, write


@pytest.fixture
def store_paths(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path, entries())


@pytest.fixture(params=["sqlite", "jsonl"])
def reader(
    request: pytest.FixtureRequest, store_paths: tuple[Path, Path]
) -> Iterator[SqliteReader | JsonlReader]:
    db, lines = store_paths
    opened = SqliteReader(str(db)) if request.param == "sqlite" else JsonlReader(str(lines))
    yield opened
    opened.close()
