"""The viewer's query over both store readers: each filter, paging, text search and
conversations, with the SQLite reader agreeing with the reference semantics (`matches`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.observability.audit.readers.jsonl import JsonlReader
from proxy.observability.audit.readers.postgres import PostgresReader
from proxy.observability.audit.readers.query import (
    Query,
    matches,
    parse_time,
    record_conversation,
)
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.observability.audit.stamps import parse_iso
from tests import factories as f
from tests.factories import audited
from tests.proxy.viewer.records import SCRIPT, SECRET, T0, write

Reader = SqliteReader | JsonlReader | PostgresReader


def ids(reader: Reader, **filters: object) -> list[str]:
    return [str(r["id"]) for r in reader.search(Query(**filters)).rows]  # type: ignore[arg-type]


def test_newest_first_with_counts_and_conversation(reader: Reader) -> None:
    rows = reader.search(Query()).rows
    assert [r["id"] for r in rows] == [
        "d000000000", "c000000000", "b100000000", "b000000000",
        "a200000000", "a100000000", "a000000000",
    ]  # fmt: skip
    a2 = next(r for r in rows if r["id"] == "a200000000")
    assert (a2["messages"], a2["curated_messages"]) == (8, 4)
    assert "original" not in a2


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"route": "chat"}, ["d000000000", "b100000000", "b000000000"]),
        ({"policy": "agent"}, ["a200000000", "a100000000", "a000000000"]),
        ({"model": "gpt-4o-mini"}, ["c000000000", "b100000000", "b000000000"]),
        ({"status": 429}, ["d000000000"]),
        ({"kind": "summary"}, ["c000000000"]),
        ({"kind": "summarizer"}, ["c000000000"]),
        ({"kind": "responses"}, []),
        ({"since": T0 + 1, "until": T0 + 11}, ["b000000000", "a200000000", "a100000000"]),
        ({"route": "agents", "kind": "chat", "status": 200}, ["a200000000", "a100000000",
                                                              "a000000000"]),
    ],
)  # fmt: skip
def test_each_filter(reader: Reader, filters: dict[str, object], expected: list[str]) -> None:
    assert ids(reader, **filters) == expected


def test_text_search_is_case_insensitive_over_messages(reader: Reader) -> None:
    assert ids(reader, text="SCRIPT>ALERT") == ["b100000000", "b000000000"]
    assert ids(reader, text=SCRIPT) == ["b100000000", "b000000000"]
    assert ids(reader, text="out 2 out") == ["a200000000"]
    assert ids(reader, text="nothing like this") == []
    # Redacted content is what the store holds: the secret itself is not found.
    assert ids(reader, text=SECRET) == []
    assert ids(reader, text="[REDACTED:openai_key]") == ["b100000000", "b000000000"]


def test_text_search_on_non_ascii(tmp_path: Path) -> None:

    db, lines = write(tmp_path, [audited(id="x1", time=T0, original=[f.user("Ärger mit Émile")])])
    for reader in (SqliteReader(str(db)), JsonlReader(str(lines))):
        assert [r["id"] for r in reader.search(Query(text="émile")).rows] == ["x1"]
        reader.close()


def test_conversations_group_the_turns_of_one_agent_loop(reader: Reader) -> None:
    rows = {r["id"]: r["conversation"] for r in reader.search(Query()).rows}
    assert rows["a000000000"] == rows["a100000000"] == rows["a200000000"]
    # b1 does not resend b0's history (its key message moved past new turns): a conversation
    # of its own, though it shares b0's system prompt and first message.
    assert rows["b000000000"] != rows["b100000000"]
    assert rows["a000000000"] not in (rows["b000000000"], rows["b100000000"])
    key = rows["a100000000"]
    assert ids(reader, conversation=key) == ["a200000000", "a100000000", "a000000000"]
    assert ids(reader, conversation=key[:6]) == ids(reader, conversation=key)
    full = reader.get("a2")
    assert full is not None
    assert record_conversation(full) == key


def test_paging_by_offset(reader: Reader) -> None:
    first = reader.search(Query(limit=3))
    second = reader.search(Query(limit=3, offset=3))
    last = reader.search(Query(limit=3, offset=6))
    assert (first.more, second.more, last.more) == (True, True, False)
    pages = [r["id"] for p in (first, second, last) for r in p.rows]
    assert pages == ids(reader)
    assert reader.search(Query(limit=3, offset=99)).rows == []


def test_sqlite_agrees_with_the_reference_semantics(store_paths: tuple[Path, Path]) -> None:
    db, lines = store_paths
    sqlite, jsonl = SqliteReader(str(db)), JsonlReader(str(lines))
    queries = [
        Query(route="agents"), Query(text="say"), Query(kind="chat", model="gpt-4o"),
        Query(since=T0 + 2), Query(status=200, text="out 1"),
    ]  # fmt: skip
    for query in queries:
        expected = [
            str(r["id"]) for r in jsonl.records() if matches(r, parse_iso(str(r["time"])), query)
        ][::-1]
        assert [r["id"] for r in sqlite.search(query).rows] == expected, query
    # Both stores key a conversation the same way, so a link works on either.
    keys = {r["id"]: r["conversation"] for r in sqlite.search(Query()).rows}
    assert keys == {r["id"]: r["conversation"] for r in jsonl.search(Query()).rows}
    sqlite.close()


def test_facets_list_the_values_present(reader: Reader) -> None:
    facets = reader.facets()
    assert facets["route"] == ["agents", "chat"]
    assert facets["model"] == ["gpt-4o", "gpt-4o-mini"]
    assert facets["status"] == ["200", "429"]


def test_parse_time_takes_iso_or_a_duration_ago() -> None:
    assert parse_time("90m", now=10_000.0) == 10_000.0 - 5400
    assert parse_time("2026-01-01T00:00:00Z", now=0) == 1_767_225_600.0
    with pytest.raises(ValueError, match="expected an ISO time"):
        parse_time("yesterday", now=0)
