"""sinks/base.py: how content-addressed stores keep a record (its fields with the tools by
reference, its blobs, its digests concatenated), and the defaults of a registered sink."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.observability.audit.entry import AuditRecord, RecordBuilder
from proxy.observability.audit.message_cache import StoredMessage
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.base import (
    DIGEST_SIZE,
    TOOLS_REF,
    Retention,
    SinkType,
    StoreUnavailable,
    blobs_of,
    no_options,
    split_digests,
    stored_fields,
    tools_digest,
)
from tests.factories import assistant, audited, system, user


def blob(n: int, text: str = "m") -> StoredMessage:
    return StoredMessage(bytes([n]) * DIGEST_SIZE, orjson.dumps({"role": "user", "content": text}))


TOOLS = StoredMessage(b"\xab" * DIGEST_SIZE, b'[{"type":"function","function":{"name":"ls"}}]')


def record(
    fields: dict[str, Any] | None = None,
    original: tuple[StoredMessage, ...] = (),
    curated: tuple[StoredMessage, ...] | None = None,
    tools: StoredMessage | None = None,
) -> AuditRecord:
    return AuditRecord(1.5, fields or {"id": "r1", "kind": "chat"}, original, curated, tools)


# -- stored_fields ---------------------------------------------------------------------


def test_without_tools_the_fields_are_stored_as_they_are() -> None:
    fields = {"id": "r1", "kind": "chat", "tools": None, "status": 200}
    assert stored_fields(record(fields)) == b'{"id":"r1","kind":"chat","tools":null,"status":200}'


def test_tools_are_stored_by_reference_to_their_blob() -> None:
    fields = {"id": "r1", "tools": orjson.Fragment(TOOLS.data), "tools_digest": "00ff"}
    stored = stored_fields(record(fields, tools=TOOLS))
    assert stored == (
        b'{"id":"r1","tools":null,"tools_digest":"00ff","tools_ref":"' + b"ab" * 16 + b'"}'
    )
    assert fields["tools"] is not None  # the record's own fields are left alone


def test_the_tools_reference_is_added_even_without_a_tools_field() -> None:
    stored = orjson.loads(stored_fields(record({"id": "r1"}, tools=TOOLS)))
    assert stored == {"id": "r1", "tools": None, TOOLS_REF: TOOLS.digest.hex()}


# -- tools_digest ----------------------------------------------------------------------


def test_the_tools_digest_is_read_back_from_stored_fields() -> None:
    assert tools_digest(stored_fields(record(tools=TOOLS))) == [TOOLS.digest]
    assert tools_digest(stored_fields(record())) == []


def test_fields_that_do_not_mention_the_reference_are_not_parsed() -> None:
    assert tools_digest(b"not JSON at all") == []


@pytest.mark.parametrize(
    "fields",
    [
        b'{"tools_ref":null}',
        b'{"tools_ref":12}',
        b'{"tools_ref":["abab"]}',
        b'{"error":"tools_ref"}',  # the key's name as a value: there is no reference
    ],
)
def test_a_reference_that_is_not_a_hex_string_is_none(fields: bytes) -> None:
    assert tools_digest(fields) == []


def test_a_reference_is_decoded_whatever_its_length() -> None:
    assert tools_digest(b'{"tools_ref":"00ff"}') == [b"\x00\xff"]
    assert tools_digest(b'{"tools_ref":""}') == [b""]


# -- blobs_of --------------------------------------------------------------------------


def test_blobs_are_the_original_then_the_curated_messages_then_the_tools() -> None:
    a, b, c = blob(1, "a"), blob(2, "b"), blob(3, "c")
    assert blobs_of(record(original=(a, b))) == (a, b)
    assert blobs_of(record(original=(a, b), curated=(c, b))) == (a, b, c, b)
    assert blobs_of(record(original=(a,), curated=(), tools=TOOLS)) == (a, TOOLS)
    assert blobs_of(record(tools=TOOLS)) == (TOOLS,)
    assert blobs_of(record()) == ()


# -- split_digests ---------------------------------------------------------------------


def test_digests_are_split_every_digest_size_bytes() -> None:
    a, b = b"a" * DIGEST_SIZE, b"b" * DIGEST_SIZE
    assert DIGEST_SIZE == 16
    assert split_digests(a + b) == [a, b]
    assert split_digests(a) == [a]
    assert split_digests(None) == []
    assert split_digests(b"") == []


@settings(max_examples=100, deadline=None)
@given(st.lists(st.binary(min_size=DIGEST_SIZE, max_size=DIGEST_SIZE), max_size=20))
def test_concatenated_digests_split_back_into_the_same_list(digests: list[bytes]) -> None:
    """What a store writes (the digests joined) reads back as the digests, in order."""
    assert split_digests(b"".join(digests)) == digests


def test_a_built_records_digests_and_tools_survive_the_store_format() -> None:
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {}}}]
    original = [system(), user("Hi"), assistant("Hello"), user("Bye")]
    entry = audited(original=original, curated=original[2:], body={"tools": tools})
    built = RecordBuilder(Redactor.build()).build(entry)
    assert built.tools is not None
    digests = [m.digest for m in (*built.original, *(built.curated or ()))]
    assert all(len(d) == DIGEST_SIZE for d in [*digests, built.tools.digest])
    assert split_digests(b"".join(digests)) == digests
    stored = stored_fields(built)
    assert tools_digest(stored) == [built.tools.digest]
    assert blobs_of(built) == (*built.original, *(built.curated or ()), built.tools)
    expected = orjson.loads(orjson.dumps(built.fields))
    assert orjson.loads(stored) == {**expected, "tools": None, TOOLS_REF: built.tools.digest.hex()}
    assert orjson.loads(built.tools.data) == tools


# -- a sink's description --------------------------------------------------------------


def test_a_sink_type_takes_nothing_but_a_name_and_an_opener() -> None:
    def opener(_path: str, _options: Any, _retention: Retention) -> Any:
        raise StoreUnavailable("down")

    sink = SinkType("memory", opener)
    assert (sink.schemes, sink.default_path, sink.keys, sink.retention) == ((), None, (), ())
    assert (sink.location_key, sink.migrate) == (None, None)
    assert sink.read_options is no_options
    with pytest.raises(StoreUnavailable, match="down"):
        sink.open("x", {}, Retention())
    with pytest.raises(dataclasses.FrozenInstanceError):
        sink.name = "other"  # type: ignore[misc]


def test_no_options_reads_no_keys() -> None:
    first = no_options(None, {"dsn": "postgresql://x"}, ("audit",))  # type: ignore[arg-type]
    assert first == {}
    assert no_options(None, {}, ()) is not first  # type: ignore[arg-type]


def test_retention_keeps_everything_by_default() -> None:
    assert Retention() == Retention(max_age_days=None, max_bytes=None)
