"""Opening the store the viewer reads: chosen like `curator audit` chooses, opened anew per
call, and a missing store named without its password."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from proxy.observability.audit.readers.jsonl import JsonlReader
from proxy.observability.audit.readers.query import Query
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.viewer.store import open_reader, opener


@pytest.mark.parametrize(
    ("name", "sink", "kind"),
    [
        ("audit.db", None, SqliteReader),
        ("audit.jsonl", None, JsonlReader),
        ("audit.data", "sqlite", SqliteReader),  # the sink wins over the suffix
        ("audit.data", "jsonl", JsonlReader),
    ],
)
def test_the_reader_follows_the_sink_else_the_suffix(
    store_paths: tuple[Path, Path], tmp_path: Path, name: str, sink: str | None, kind: type
) -> None:
    db, lines = store_paths
    path = tmp_path / "copy" / name
    path.parent.mkdir()
    shutil.copy(lines if kind is JsonlReader else db, path)
    reader = open_reader(str(path), sink)
    try:
        assert isinstance(reader, kind)
        assert reader.search(Query(limit=1)).rows
    finally:
        reader.close()


@pytest.mark.parametrize("name", ["none.db", "none.jsonl"])
def test_no_store_yet_is_file_not_found_with_a_plain_message(tmp_path: Path, name: str) -> None:
    where = tmp_path / name
    with pytest.raises(FileNotFoundError) as raised:
        open_reader(str(where))
    assert str(raised.value) == f"no audit records yet at {where}"
    assert raised.value.__cause__ is None
    assert raised.value.__suppress_context__


def test_a_password_in_the_location_is_masked_in_the_message() -> None:
    location = "dbname=audit password=hunter2 host=localhost"
    with pytest.raises(FileNotFoundError) as raised:
        open_reader(location, "sqlite")
    assert "hunter2" not in str(raised.value)
    assert str(raised.value) == "no audit records yet at dbname=audit password=*** host=localhost"


def test_an_unknown_sink_is_a_lookup_error_not_a_missing_store(tmp_path: Path) -> None:
    with pytest.raises(LookupError, match="no reader for sink 'parquet'"):
        open_reader(str(tmp_path / "audit.db"), "parquet")


def test_opener_opens_a_fresh_reader_each_call_and_finds_a_store_made_later(
    tmp_path: Path, store_paths: tuple[Path, Path]
) -> None:
    target = tmp_path / "later.jsonl"
    open_it = opener(str(target), None, {"unused": True})
    with pytest.raises(FileNotFoundError, match="no audit records yet"):
        open_it()
    shutil.copy(store_paths[1], target)
    first, second = open_it(), open_it()
    try:
        assert first is not second
        assert isinstance(first, JsonlReader)
        assert first.get("a2") is not None
        first.close()
        assert second.get("a2") is not None  # closing one leaves the other usable
    finally:
        second.close()
