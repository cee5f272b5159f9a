from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from policies.base import Action
from policies.messages import Message
from proxy.observability.audit import entry as entry_module
from proxy.observability.audit.capture import BodyCapture
from proxy.observability.audit.entry import FIELD_ORDER, RecordBuilder
from proxy.observability.audit.redact import MASK, Detector, Redactor
from proxy.observability.audit.stamps import iso_time, key_fingerprint, parse_iso
from proxy.observability.exchange import ExchangeRecord
from proxy.protocols.responses.items import GROUP, INSTRUCTIONS
from proxy.protocols.responses.protocol import RESPONSES
from tests.factories import audited

KEY = "sk-proj-" + "Qw3_Er4-Ty5" * 8
PEM = (
    "-----BEGIN EC PRIVATE KEY-----\n"
    "MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oG\n"
    "-----END EC PRIVATE KEY-----"
)
T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def conversation() -> list[dict[str, Any]]:
    arguments = json.dumps({"path": "/home/me/.ssh/id_ec", "content": PEM})
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": f"Deploy with OPENAI_API_KEY={KEY}"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "write_file", "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "written " + "x" * 3000},
        {"role": "user", "content": "thanks"},
    ]


def sse(*pieces: str) -> bytes:
    out = b""
    for piece in pieces:
        body = {"choices": [{"index": 0, "delta": {"content": piece}}]}
        out += b"data: " + json.dumps(body).encode() + b"\n\n"
    return out + b"data: [DONE]\n\n"


def entry(**overrides: Any) -> ExchangeRecord:
    values: dict[str, Any] = {
        "id": "req-1",
        "time": T0,
        "route": "agents",
        "policy": "coding",
        "model": "gpt-4o",
        "authorization": f"Bearer {KEY}",
        "original": conversation(),
        "status": 200,
    }
    return audited(**(values | overrides))


@pytest.fixture
def builder() -> RecordBuilder:
    return RecordBuilder(Redactor.build())


def test_fingerprint_is_a_short_hash_of_the_bearer_token() -> None:
    expected = "sha256:" + hashlib.sha256(KEY.encode()).hexdigest()[:12]
    assert key_fingerprint(f"Bearer {KEY}") == expected
    assert key_fingerprint(f"bearer   {KEY} ") == expected
    assert key_fingerprint(KEY) == expected
    assert key_fingerprint(None) is None
    assert key_fingerprint("  ") is None


def test_secrets_never_reach_the_record(builder: RecordBuilder) -> None:
    record = builder.build(entry())
    data = record.to_json()
    assert KEY.encode() not in data
    assert b"PRIVATE KEY" not in data
    assert b"MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVJk5oG" not in data
    parsed = record.as_dict()
    assert parsed["original"][1]["content"] == "Deploy with OPENAI_API_KEY=[REDACTED:openai_key]"
    arguments = json.loads(parsed["original"][2]["tool_calls"][0]["function"]["arguments"])
    assert arguments == {"path": "/home/me/.ssh/id_ec", "content": "[REDACTED:private_key]"}
    assert parsed["client"] == key_fingerprint(KEY)
    assert parsed["redaction"] == "ok"


def test_record_fields_and_order(builder: RecordBuilder) -> None:
    action = Action("tool_result_truncation", "truncate", (3,), 700, "tool output over 2000")
    original = conversation()
    curated = [
        *original[:3],
        {**original[3], "content": "written xxx [... 2990 chars]"},
        original[4],
    ]
    record = builder.build(
        entry(
            curated=curated,
            actions=[action],
            tokens_before=1000,
            tokens_after=300,
            latency_ms=12.5,
            ttfb_ms=4.0,
            mode="curated",
        )
    )
    parsed = record.as_dict()
    assert list(parsed) == [*FIELD_ORDER, "original", "curated"]
    assert parsed["time"] == "2026-01-01T00:00:00.000Z"
    assert parsed["actions"] == [
        {
            "curator": "tool_result_truncation",
            "kind": "truncate",
            "indexes": [3],
            "tokens_removed": 700,
            "reason": "tool output over 2000",
        }
    ]
    assert parsed["curated"][3]["content"] == "written xxx [... 2990 chars]"
    assert record.curated is not None
    # Unchanged messages are the same stored message (same hash) in both lists.
    assert record.curated[0] == record.original[0]
    assert record.curated[3] != record.original[3]
    assert (parsed["tokens_before"], parsed["tokens_after"], parsed["mode"]) == (
        1000,
        300,
        "curated",
    )


def test_an_action_reason_quoting_a_secret_is_redacted_and_its_indexes_kept(
    builder: RecordBuilder,
) -> None:
    # A tool's name is the client's own text, and reasons quote it.
    reason = f"cleared 1 old result(s) of 'deploy {KEY}'"
    action = Action("tool_use_clearing", "replace", tuple(range(0, 900, 3)), 42, reason)
    parsed = builder.build(entry(actions=[action])).as_dict()
    (stored,) = parsed["actions"]
    assert stored["reason"] == "cleared 1 old result(s) of 'deploy [REDACTED:openai_key]'"
    assert stored["indexes"] == list(range(0, 900, 3))
    assert (stored["curator"], stored["kind"], stored["tokens_removed"]) == (
        "tool_use_clearing",
        "replace",
        42,
    )


def test_curated_equal_to_original_is_stored_once(builder: RecordBuilder) -> None:
    record = builder.build(entry(curated=list(conversation())))
    assert record.curated is None
    parsed = record.as_dict()
    assert parsed["curated"] == parsed["original"]


@pytest.mark.parametrize(
    ("secret", "name"),
    [(KEY, "openai_key"), ("AKIA" + "Z7Y6X5W4V3U2T1S0", "aws_access_key"), (PEM, "private_key")],
)
def test_secret_split_across_stream_chunks_is_redacted_at_every_offset(
    builder: RecordBuilder, secret: str, name: str
) -> None:
    # The model streams the secret in pieces; the relay's chunks split the bytes anywhere.
    third = len(secret) // 3
    pieces = [secret[:third], secret[third : 2 * third], secret[2 * third :]]
    stream = sse("Your key: ", *pieces, " keep it safe")
    first, last = stream.index(b'"Your'), stream.rindex(b" keep")
    for cut in range(first, last):
        acc = BodyCapture()
        acc.feed(stream[:cut])
        acc.feed(stream[cut:])
        record = builder.build(entry(response=acc))
        assert record.as_dict()["response"]["text"] == f"Your key: [REDACTED:{name}] keep it safe"
        assert secret[-12:].encode() not in record.to_json(), cut


def test_streamed_tool_call_arguments_are_redacted(builder: RecordBuilder) -> None:
    args = json.dumps({"token": KEY})
    deltas = [args[:9], args[9:30], args[30:]]
    stream = b""
    for i, part in enumerate(deltas):
        call: dict[str, Any] = {"index": 0, "function": {"arguments": part}}
        if i == 0:
            call |= {"id": "c", "type": "function", "function": {"name": "f", "arguments": part}}
        body = {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}
        stream += b"data: " + json.dumps(body).encode() + b"\n\n"
    acc = BodyCapture()
    acc.feed(stream)
    response = builder.build(entry(response=acc)).as_dict()["response"]
    arguments = response["tool_calls"][0]["function"]["arguments"]
    assert json.loads(arguments) == {"token": "[REDACTED:openai_key]"}


def test_non_streamed_response_and_truncation_flag(builder: RecordBuilder) -> None:
    body = {
        "choices": [{"index": 0, "message": {"content": f"use {KEY}"}, "finish_reason": "stop"}],
        "usage": {"total_tokens": 9},
    }
    response = builder.build(entry(response=json.dumps(body).encode())).as_dict()["response"]
    assert response == {
        "text": "use [REDACTED:openai_key]",
        "tool_calls": [],
        "usage": {"total_tokens": 9},
        "finish_reason": "stop",
        "truncated": False,
    }
    acc = BodyCapture(max_bytes=40)
    acc.feed(sse("a" * 100))
    assert builder.build(entry(response=acc)).as_dict()["response"]["truncated"] is True


def test_an_incomplete_response_says_why_and_is_truncated(builder: RecordBuilder) -> None:
    acc = BodyCapture()
    acc.feed(sse("half an answer")[:40])
    cut = builder.build(entry(response=acc, incomplete="upstream_timeout")).as_dict()
    assert (cut["status"], cut["incomplete"], cut["error"]) == (
        200,
        "upstream_timeout",
        "upstream_timeout",
    )
    assert cut["response"]["truncated"] is True
    left = builder.build(entry(response=acc, incomplete="client_disconnect")).as_dict()
    assert (left["incomplete"], left["error"]) == ("client_disconnect", None)
    # Without the stored response (store_responses: false) the reason is still recorded.
    bare = RecordBuilder(Redactor.build(), store_responses=False)
    assert bare.build(entry(incomplete="shutdown")).as_dict()["error"] == "shutdown"
    complete = builder.build(entry(response=sse("done"))).as_dict()
    assert (complete["incomplete"], complete["error"]) == (None, None)
    assert complete["response"]["truncated"] is False


def test_error_bodies_are_redacted(builder: RecordBuilder) -> None:
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}}).encode()
    parsed = builder.build(entry(status=401, response=body)).as_dict()
    assert parsed["response"] is None
    assert parsed["error"] == {
        "error": {"message": "Incorrect API key provided: [REDACTED:openai_key]"}
    }
    text = builder.build(entry(status=502, response=f"bad gateway {KEY}".encode())).as_dict()
    assert text["error"] == "bad gateway [REDACTED:openai_key]"


def test_responses_can_be_left_out() -> None:
    builder = RecordBuilder(Redactor.build(), store_responses=False)
    parsed = builder.build(entry(response=sse("hello"))).as_dict()
    assert parsed["response"] is None
    assert parsed["original"]


def test_summarizer_records_link_to_their_request(builder: RecordBuilder) -> None:
    parsed = builder.build(
        entry(id="req-1.s1", kind="summarizer", parent_id="req-1", response="A summary.")
    ).as_dict()
    assert (parsed["kind"], parsed["parent_id"]) == ("summarizer", "req-1")
    assert parsed["response"]["text"] == "A summary."


class Exploding(Redactor):
    """Fails on any text containing a marker, the way a broken custom detector would."""

    def text(self, text: str) -> str:
        if "Deploy" in text:
            raise RuntimeError(f"boom while looking at {text}")
        return super().text(text)


def all_strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from all_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from all_strings(item)


def test_failed_redaction_masks_every_string() -> None:
    builder = RecordBuilder(Exploding(Redactor.build().detectors))
    action = Action("tool_result_truncation", "truncate", (3,), 7, f"'{KEY}' result cut")
    record = builder.build(entry(response=sse(f"echo {KEY}"), skip_reason="odd", actions=[action]))
    assert KEY.encode() not in record.to_json()
    parsed = record.as_dict()
    assert parsed["redaction"] == "failed"
    assert builder.last_failure == "RuntimeError"
    assert (parsed["id"], parsed["route"], parsed["client"]) == (
        "req-1",
        "agents",
        key_fingerprint(KEY),
    )
    content = [parsed["original"], parsed["response"], parsed["skip_reason"], parsed["model"]]
    content.append(parsed["actions"])
    assert parsed["actions"][0]["indexes"] == [3]
    strings = list(all_strings(content))
    assert strings
    assert set(strings) == {MASK}


class Unreadable(Sequence[Message]):
    """A message list that fails when read, so that even masking cannot use it."""

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: Any) -> Any:
        raise RuntimeError("gone")

    def __iter__(self) -> Iterator[Message]:
        raise RuntimeError("gone")


def test_when_even_masking_fails_only_proxy_fields_are_kept(builder: RecordBuilder) -> None:
    record = builder.build(entry(original=Unreadable(), response=sse(KEY)))
    parsed = record.as_dict()
    assert parsed["redaction"] == "failed"
    assert parsed["original"] == []
    assert parsed["response"] is None
    assert parsed["id"] == "req-1"
    assert KEY.encode() not in record.to_json()


class Counting(Redactor):
    """Counts redacted strings, to see the message cache at work."""

    def __init__(self, detectors: Sequence[Detector]) -> None:
        super().__init__(detectors)
        self.calls = 0

    def text(self, text: str) -> str:
        self.calls += 1
        return super().text(text)


def test_resent_history_is_redacted_once() -> None:
    redactor = Counting(Redactor.build().detectors)
    builder = RecordBuilder(redactor)
    history = conversation()
    first = builder.build(entry(original=history))
    after_first = redactor.calls
    second = builder.build(entry(original=[*history, {"role": "user", "content": "more"}]))
    assert second.original[: len(history)] == first.original
    # Only the new message and the non-message fields were redacted again.
    assert redactor.calls - after_first < after_first


def test_with_no_message_cache_a_resent_history_is_redacted_again() -> None:
    redactor = Counting(Redactor.build().detectors)
    builder = RecordBuilder(redactor, cache_bytes=0)  # audit.cache_bytes: 0
    first = builder.build(entry(original=conversation()))
    after_first = redactor.calls
    second = builder.build(entry(original=conversation()))
    assert second.original == first.original
    assert redactor.calls == 2 * after_first


def test_iso_time_round_trip() -> None:
    assert iso_time(T0 + 0.25) == "2026-01-01T00:00:00.250Z"
    assert parse_iso("2026-01-01T00:00:00.250Z") == T0 + 0.25
    assert parse_iso("2026-01-01T01:00:00+01:00") == T0
    assert parse_iso("2026-01-01") == T0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", iso_time(T0))


def test_a_protocols_own_message_keys_are_never_stored(builder: RecordBuilder) -> None:
    """The Responses protocol marks its neutral messages with the items they stand for; the
    audit shows what the client sent and the model saw, not that bookkeeping."""
    original: list[Message] = [
        {"role": "system", "content": "be brief", GROUP: INSTRUCTIONS},
        {"role": "user", "content": "hi", GROUP: 0},
    ]
    entry = audited(id="r", time=0.0, protocol=RESPONSES, original=original)
    stored = builder.build(entry)
    assert [json.loads(m.data) for m in stored.original] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert GROUP in original[1]  # the request's own messages are left as they were
    chat = builder.build(audited(id="c", time=0.0, original=[{"role": "user", "x": 1}]))
    assert json.loads(chat.original[0].data) == {"role": "user", "x": 1}


def test_the_counters_digests_key_the_cache_and_change_nothing_stored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the curation's digests (`ExchangeRecord.keys`) the builder hashes only what a
    curator made, and the record is the one it builds without them."""

    def history() -> list[dict[str, Any]]:  # no secret: a cut message is cached too
        return [{"role": "user", "content": f"step {i} " + "x" * 200} for i in range(4)]

    sent = history()
    cut = {**sent[2], "content": "step 2 [cut]"}
    curated = [sent[0], sent[1], cut, sent[3]]
    keys = tuple(bytes([i]) * 16 for i in range(len(sent)))
    plain = RecordBuilder(Redactor.build()).build(entry(original=sent, curated=curated))
    hashed: list[object] = []
    real = entry_module.raw_digest
    monkeypatch.setattr(entry_module, "raw_digest", lambda v: hashed.append(v) or real(v))
    keyed_builder = RecordBuilder(Redactor.build())
    keyed = keyed_builder.build(entry(original=sent, curated=curated, keys=keys))
    assert hashed == [cut]
    assert keyed.as_dict() | {"time": None} == plain.as_dict() | {"time": None}
    # The next request's own objects, the same digests: served from the cache.
    hashed.clear()
    again = keyed_builder.build(entry(original=history(), keys=keys))
    assert hashed == []
    assert again.original == keyed.original


def test_a_kept_message_is_stored_as_among_the_originals_not_redacted_again() -> None:
    # No message cache, so only reuse can spare the kept messages a second redaction.
    redactor = Counting(Redactor.build().detectors)
    builder = RecordBuilder(redactor, cache_bytes=0)
    # No secret either: a message made from one is redacted by a twin that knows it.
    history = [m for m in conversation() if m["role"] in ("system", "tool", "user")][::2]
    history += [{"role": "user", "content": f"step {i}"} for i in range(3)]
    builder.build(entry(original=history))
    alone = redactor.calls
    made = {"role": "tool", "tool_call_id": "call_1", "content": "[tool result cleared]"}
    assert KEY not in str(history)
    assert len(history) == 5
    curated = [*history[:3], made, history[4]]
    record = builder.build(entry(original=history, curated=curated))
    assert record.curated is not None
    assert [record.curated[i] for i in (0, 1, 2, 4)] == [record.original[i] for i in (0, 1, 2, 4)]
    assert record.curated[2] is record.original[2]
    # The made message's strings (its keys and values), and nothing else, on top.
    assert redactor.calls - 2 * alone == 6


def test_an_action_reason_repeated_across_actions_is_redacted_once() -> None:
    redactor = Counting(Redactor.build().detectors)
    builder = RecordBuilder(redactor, cache_bytes=0)  # every record redacted in full
    reason = "cleared 1 old result(s) of 'read_file': the conversation has 130,910 tokens"
    actions = [Action("tool_use_clearing", "replace", (i,), 9, reason) for i in range(40)]
    builder.build(entry(actions=actions[:1]))
    one = redactor.calls
    parsed = builder.build(entry(actions=actions)).as_dict()
    assert [a["reason"] for a in parsed["actions"]] == [reason] * 40
    assert [a["indexes"] for a in parsed["actions"]] == [[i] for i in range(40)]
    assert redactor.calls - one == one  # the same strings as with one action
