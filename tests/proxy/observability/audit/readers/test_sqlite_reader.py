"""The SQLite reader opening a store the writer has only just created."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from proxy.observability.audit.readers.sqlite import SqliteReader


def test_a_file_without_the_tables_yet_is_no_store_yet(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    sqlite3.connect(path).close()  # the file exists, its tables not yet
    with pytest.raises(FileNotFoundError, match="nothing written yet"):
        SqliteReader(str(path))


def test_a_missing_file_is_no_store(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no audit store at"):
        SqliteReader(str(tmp_path / "absent.db"))
