"""An agent's resent history is taken whole from the conversation's last record
(`audit.resent`), for a store by reference: the same record as looking up each message."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.observability.audit import entry as entry_module
from proxy.observability.audit.entry import AuditRecord, RecordBuilder
from proxy.observability.audit.message_cache import MessageCache, StoredMessage
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.resent import MAX_MESSAGES, MIN_MESSAGES, Histories
from proxy.observability.audit.sinks.sqlite import SqliteSink
from proxy.protocols.responses.items import GROUP
from proxy.protocols.responses.protocol import RESPONSES
from tests.factories import assistant, audited, tool_result, user
from tests.proxy.observability.audit.test_entry import KEY

Msg = dict[str, Any]


def history(turns: int, secret_at: int = 1) -> list[Msg]:
    """An agent's history of `turns` user/tool exchanges; one message says the key."""
    messages: list[Msg] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(turns):
        messages.append(user(f"step {i}" + (f" OPENAI_API_KEY={KEY}" if i == secret_at else "")))
        messages.append(tool_result(f"call_{i}", f"output {i} " + "x" * 50))
    return messages


def build(builder: RecordBuilder, messages: list[Msg], rid: str, **fields: Any) -> AuditRecord:
    # The request's own objects every turn, as the proxy parses them.
    return builder.build(audited(id=rid, time=1.0, original=copy.deepcopy(messages), **fields))


def counted_hashes(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """What the builder hashes for the cache (messages without the curation's keys)."""
    hashed: list[object] = []
    real = entry_module.raw_digest
    monkeypatch.setattr(entry_module, "raw_digest", lambda v: hashed.append(v) or real(v))
    return hashed


def test_a_turn_takes_what_its_last_turn_sent_and_looks_up_only_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    first = build(builder, history(10), "1")
    lookups: list[bytes] = []
    real_get = MessageCache.get
    monkeypatch.setattr(MessageCache, "get", lambda c, key: lookups.append(key) or real_get(c, key))
    grown = history(11)
    second = build(builder, grown, "2")
    assert len(lookups) == 2  # the new user message and tool result, nothing resent
    assert second.original[: len(first.original)] == first.original
    assert all(m.data is None for m in second.original[: len(first.original)])
    assert all(m.data is not None for m in second.original[len(first.original) :])
    assert [m.redacted for m in second.original] == [m.redacted for m in by_value(grown)]
    # Left-out bodies are made again, redacted, for a store that lacks them.
    assert [second.body(m) for m in second.original] == [m.data for m in by_value(grown)]
    assert KEY.encode() not in second.to_json()


def by_value(messages: list[Msg]) -> tuple[StoredMessage, ...]:
    return build(RecordBuilder(Redactor.build()), messages, "ref").original


def test_a_history_changed_before_its_end_is_looked_up_message_by_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    builder = RecordBuilder(Redactor.build(), by_reference=True, cache_bytes=0)
    build(builder, history(10), "1")
    edited = history(11)
    edited[3] = user("step 1, edited")
    hashed = counted_hashes(monkeypatch)
    record = build(builder, edited, "2")
    assert len(hashed) == len(edited)  # no cache, and no remembered history begins it
    assert [m.digest for m in record.original] == [m.digest for m in by_value(edited)]


def keys(n: int, conversation: int = 0) -> tuple[bytes, ...]:
    return tuple(bytes([conversation]) + i.to_bytes(15, "big") for i in range(n))


def test_a_conversation_keeps_its_longest_turn_and_short_ones_are_not_remembered() -> None:
    histories = Histories()
    made: list[object] = []

    def stored(message: object, key: bytes) -> StoredMessage:
        made.append(message)
        return StoredMessage(key, b"{}")

    sources: dict[bytes, object] = {}
    short = list(range(MIN_MESSAGES - 1))
    histories.originals(short, keys(len(short)), stored, sources)
    histories.originals(short, keys(len(short)), stored, sources)
    assert len(made) == 2 * len(short)
    made.clear()
    turn = list(range(MIN_MESSAGES + 4))
    histories.originals(turn[:-2], keys(len(turn) - 2), stored, sources)
    out = histories.originals(turn, keys(len(turn)), stored, sources)
    assert made == [*turn[:-2], *turn[-2:]]  # the second turn made only its last two
    assert [m.data for m in out] == [None] * (len(turn) - 2) + [b"{}"] * 2
    assert sources == {keys(len(turn))[i]: turn[i] for i in range(len(turn) - 2)}
    made.clear()
    histories.originals(turn[:-2], keys(len(turn) - 2), stored, sources)
    assert len(made) == len(turn) - 2  # the shorter turn was let go for the longer one


def test_histories_are_bounded() -> None:
    histories = Histories()
    each = MAX_MESSAGES // 4
    for n in range(6):
        made = keys(each + n, n)  # each a little longer
        histories.originals(made, made, lambda _m, key: StoredMessage(key, None), {})
    assert histories._size == sum(len(k) for k, _ in histories._last.values()) <= MAX_MESSAGES
    assert [k[-1] for k, _ in histories._last.values()] == [
        keys(each + n, n)[-1] for n in (3, 4, 5)
    ]
    grown = keys(each + 6, 5)  # the last conversation's next turn takes its place
    histories.originals(grown, grown, lambda _m, key: StoredMessage(key, None), {})
    assert histories._size == sum(len(k) for k, _ in histories._last.values()) == 3 * each + 13
    too_long = keys(MAX_MESSAGES + 1, 9)
    histories.originals(too_long, too_long, lambda _m, key: StoredMessage(key, None), {})
    assert too_long[-1] not in histories._last


def test_no_message_cache_no_histories(monkeypatch: pytest.MonkeyPatch) -> None:
    builder = RecordBuilder(Redactor.build(), by_reference=True, cache_bytes=0)
    build(builder, history(10), "1")
    hashed = counted_hashes(monkeypatch)
    build(builder, history(10), "2")
    assert len(hashed) == len(history(10))
    assert builder._histories is None


def test_a_responses_history_made_again_leaves_out_the_protocols_own_keys() -> None:
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    items = [{**m, GROUP: i} for i, m in enumerate(history(10))]
    first = build(builder, items, "1", protocol=RESPONSES)
    again = build(builder, items, "2", protocol=RESPONSES)
    assert again.original == first.original
    assert all(m.data is None for m in again.original)
    build(builder, history(3), "3")  # a chat record in between: its protocol has no keys
    made = [orjson.loads(again.body(m)) for m in again.original]
    assert made == [orjson.loads(m.data or b"") for m in first.original]
    assert all(GROUP not in m for m in made)


def test_a_store_that_lacks_a_resent_body_gets_it_made_again(tmp_path: Path) -> None:
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    build(builder, history(10), "1")  # written to another store, or its write failed
    sink = SqliteSink(str(tmp_path / "audit.db"))
    sink.write(build(builder, history(11), "2"))
    sink.close()
    reader = SqliteReader(str(tmp_path / "audit.db"))
    stored = reader.get("2")
    reader.close()
    assert stored is not None
    assert stored["original"] == [orjson.loads(m.data or b"") for m in by_value(history(11))]


EDITS = st.lists(
    st.tuples(st.sampled_from(["grow", "same", "edit", "trim", "other"]), st.integers(0, 40)),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None)
@given(EDITS)
def test_records_are_those_built_without_histories(edits: list[tuple[str, int]]) -> None:
    """Whatever a client resends (grown, repeated, edited, trimmed, another conversation in
    between), the record is the one a builder by value makes, bodies made again included."""
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    messages = history(9)
    for n, (edit, at) in enumerate(edits):
        if edit == "grow":
            messages = [*messages, assistant(f"answer {n}"), user(f"next {n}")]
        elif edit == "edit":
            messages = [*messages]
            messages[at % len(messages)] = user(f"edited {n}")
        elif edit == "trim":
            messages = messages[: max(1, len(messages) - at % 5)]
        elif edit == "other":
            build(builder, history(9 + at % 3, secret_at=at % 4), f"o{n}")
        record = build(builder, messages, str(n))
        expected = by_value(messages)
        assert record.original == expected
        assert [m.redacted for m in record.original] == [m.redacted for m in expected]
        assert [record.body(m) for m in record.original] == [m.data for m in expected]
