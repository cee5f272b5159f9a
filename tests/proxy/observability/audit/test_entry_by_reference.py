"""A record builder for a store that keeps each message once, by hash (SQLite, PostgreSQL):
its cache keeps hashes, not bodies, and a record leaves out the bodies of the messages the
cache knew. The store asks for one only when it lacks it, and gets the same bytes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.observability.audit import entry as entry_module
from proxy.observability.audit.entry import AuditRecord, RecordBuilder
from proxy.observability.audit.message_cache import ENTRY_BYTES, SLIM_ENTRY_BYTES, stored_of
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.sqlite import SqliteSink
from tests.factories import audited
from tests.proxy.observability.audit.test_entry import KEY, Counting, conversation

TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]


def build(builder: RecordBuilder, messages: list[dict[str, Any]], rid: str) -> AuditRecord:
    return builder.build(audited(id=rid, time=1.0, original=messages, body={"tools": TOOLS}))


def without_time(record: AuditRecord) -> dict[str, Any]:
    return record.as_dict() | {"id": None, "time": None}


def test_the_cache_keeps_a_hash_and_a_flag_per_message_not_its_body() -> None:
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    first = build(builder, conversation(), "1")
    assert all(m.data is not None for m in first.original)  # a first sight carries all
    held = [stored_of(entry) for entry in builder._cache.items.values()]
    bodies = [m.data for m in held if m.data is not None]
    assert [json.loads(data) for data in bodies] == [TOOLS]  # the fields quote them
    assert len(held) == len(first.original) + 1
    slim = SLIM_ENTRY_BYTES * len(first.original)
    assert builder._cache.size == slim + ENTRY_BYTES + len(bodies[0])
    by_value = RecordBuilder(Redactor.build())
    build(by_value, conversation(), "1")
    saved = sum(len(m.data or b"") for m in first.original)
    assert saved > 3000  # the tool result's
    slimmer = (ENTRY_BYTES - SLIM_ENTRY_BYTES) * len(first.original)
    assert by_value._cache.size - builder._cache.size == saved + slimmer


def test_a_resent_message_is_not_redacted_and_its_body_is_left_out_but_made_again() -> None:
    redactor = Counting(Redactor.build().detectors)
    builder = RecordBuilder(redactor, by_reference=True)
    first = build(builder, conversation(), "1")
    calls = redactor.calls
    again = build(builder, conversation(), "2")  # the next request's own objects
    assert again.original == first.original  # the same hashes
    assert all(m.data is None for m in again.original)
    assert [m.redacted for m in again.original] == [m.redacted for m in first.original]
    assert any(m.redacted for m in again.original)  # the key and the PEM
    assert redactor.calls - calls < calls / 2  # the fields only, not the messages
    assert [again.body(m) for m in again.original] == [m.data for m in first.original]
    assert without_time(again) == without_time(first)  # JSONL, the viewer: all of it
    assert KEY.encode() not in again.to_json()
    assert again.as_dict()["tools"] == TOOLS


def test_a_body_made_again_must_have_its_hash() -> None:
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    build(builder, conversation(), "1")
    again = build(builder, conversation(), "2")
    builder.redactor = Redactor.build(builtin=False)  # other redaction: other bytes
    secret = next(m for m in again.original if m.redacted)
    with pytest.raises(ValueError, match="hash"):
        again.body(secret)


def test_by_value_records_carry_every_body() -> None:
    builder = RecordBuilder(Redactor.build())
    build(builder, conversation(), "1")
    again = build(builder, conversation(), "2")
    assert all(m.data is not None for m in again.original)
    assert again.remake is None


def test_a_store_that_lacks_a_left_out_body_gets_it_made_again(tmp_path: Path) -> None:
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    first_store = SqliteSink(str(tmp_path / "first.db"))
    first_store.write(build(builder, conversation(), "1"))
    first_store.close()
    # A store that never saw the messages (a new file, or one whose write failed).
    path = str(tmp_path / "second.db")
    second_store = SqliteSink(path)
    again = build(builder, conversation(), "2")
    assert all(m.data is None for m in again.original)
    second_store.write(again)
    second_store.close()
    reader = SqliteReader(path)
    stored = reader.get("2")
    reader.close()
    assert stored is not None
    expected = [orjson.loads(m) for m in map(again.body, again.original)]
    assert stored["original"] == expected
    assert "[REDACTED:" in json.dumps(stored["original"])
    assert KEY not in json.dumps(stored["original"])


def test_a_body_in_the_batch_is_used_rather_than_made_again(tmp_path: Path) -> None:
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    first = build(builder, conversation(), "1")

    def refuse(_digest: bytes) -> bytes:
        raise AssertionError("made again though the batch had it")

    again = dataclasses.replace(build(builder, conversation(), "2"), remake=refuse)
    sink = SqliteSink(str(tmp_path / "audit.db"))
    sink.write_many([first, again])  # both new to the store; the first carries the bodies
    sink.write(again)  # the store has them now: nothing to make
    sink.close()


def test_a_tools_list_seen_again_is_hashed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests share an equal tools list (the proxy's `SharedTools`); equal lists that are
    other objects get the same digest, hashed again."""
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    hashed: list[object] = []
    real = entry_module.raw_digest
    monkeypatch.setattr(entry_module, "raw_digest", lambda v: hashed.append(v) or real(v))
    tools = orjson.loads(orjson.dumps(TOOLS))
    records = [
        builder.build(audited(id=str(i), time=1.0, original=[], body={"tools": listed}))
        for i, listed in enumerate([tools, tools, orjson.loads(orjson.dumps(TOOLS))])
    ]
    assert len({r.fields["tools_digest"] for r in records}) == 1
    assert hashed == [tools, TOOLS]
