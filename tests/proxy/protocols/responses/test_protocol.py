"""The Responses `WireProtocol`: what it curates and skips, its rebuild, usage and assembly."""

from __future__ import annotations

import orjson
import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.config.limits import Limits
from proxy.errors import ProxyError
from proxy.protocols import protocol_for
from proxy.protocols.responses.protocol import RESPONSES, SERVER_STATE, STRING_INPUT
from tests.fakes import responses_items as r
from tests.fakes import responses_rules
from tests.fakes.upstream import Behavior, ToolCall

LIMITS = Limits()
ENC = tiktoken.get_encoding("o200k_base")


def body(**fields: object) -> bytes:
    return orjson.dumps({"model": "gpt-4.1", "input": [r.user()], **fields})


def test_it_is_registered_for_post_v1_responses_only() -> None:
    assert protocol_for("POST", "/v1/responses") is RESPONSES
    assert protocol_for("GET", "/v1/responses") is None
    assert protocol_for("POST", "/v1/responses/resp_1/cancel") is None


@pytest.mark.parametrize(
    ("raw", "skip"),
    [
        (body(previous_response_id="resp_1"), SERVER_STATE),
        (body(conversation="conv_1"), SERVER_STATE),
        (body(conversation={"id": "conv_1"}), SERVER_STATE),
        (orjson.dumps({"model": "gpt-4.1", "input": "Hello"}), STRING_INPUT),
        (orjson.dumps({"model": "gpt-4.1"}), STRING_INPUT),
        (body(input=[]), "no_messages"),
        (b"{nope", "invalid_json"),
        (b"[1]", "not_an_object"),
        (body(input=[r.user(), r.function_output("x")]), "unpaired_output"),
    ],
)
def test_what_is_not_curated_says_why(raw: bytes, skip: str) -> None:
    request = RESPONSES.parse(raw, LIMITS)
    assert request.skip == skip
    assert request.raw is raw


def test_a_curatable_request_has_messages_and_chat_shaped_facts() -> None:
    raw = body(instructions="Be brief.", max_output_tokens=300, tools=[{"type": "web_search"}])
    request = RESPONSES.parse(raw, LIMITS)
    assert request.skip is None
    assert request.model == "gpt-4.1"
    assert [m["role"] for m in request.messages] == ["system", "user"]
    assert request.facts["max_completion_tokens"] == 300
    assert request.facts["tools"][0]["type"] == "custom"


def test_too_many_items_is_the_servers_limit() -> None:
    raw = body(input=[r.user()] * 3)
    with pytest.raises(ProxyError) as caught:
        RESPONSES.parse(raw, Limits(max_messages=2))
    assert caught.value.code == "too_many_items"


def test_rebuild_replaces_input_and_keeps_every_other_field_in_order() -> None:
    fields = {"store": False, "include": ["reasoning.encrypted_content"], "truncation": "auto"}
    raw = orjson.dumps(
        {"model": "gpt-4.1", "instructions": "x", "input": [r.user("a"), r.user("b")], **fields}
    )
    request = RESPONSES.parse(raw, LIMITS)
    rebuilt = orjson.loads(RESPONSES.rebuild(request, request.messages[:1] + request.messages[2:]))
    assert list(rebuilt) == ["model", "instructions", "input", *fields]
    assert rebuilt["input"] == [r.user("b")]
    assert rebuilt["instructions"] == "x"


def test_rebuild_keeps_every_other_fields_exact_bytes() -> None:
    head = b'{"model": "gpt-4.1", "seed": 18446744073709551617, "input": '
    tail = b', "temperature": 1E-1}'
    request = RESPONSES.parse(head + orjson.dumps([r.user("a"), r.user("b")]) + tail, LIMITS)
    rebuilt = RESPONSES.rebuild(request, request.messages[1:])
    assert rebuilt == head + orjson.dumps([r.user("b")]) + tail


def test_usage_comes_from_a_body_and_from_the_completed_event() -> None:
    request = {"model": "gpt-4.1", "input": [r.user()]}
    done = responses_rules.response(request, Behavior(reply="Hi there."), 2048, ENC)
    for data in (orjson.dumps(done), b"".join(responses_rules.events(done))):
        usage = RESPONSES.usage(data[-16 * 1024 :])
        assert usage is not None
        assert usage.input_tokens == 2048
        assert usage.cached_tokens == 1024
        assert usage.output_tokens == done["usage"]["output_tokens"]
        assert usage.reasoning_tokens == 0


@pytest.mark.parametrize("tag", ["x", {"n": 1}, None])
def test_usage_survives_a_metadata_key_named_usage(tag: object) -> None:
    # The API echoes `metadata` after `usage`: its `usage` key is the last in the body.
    request = {"model": "gpt-4.1", "input": [r.user()]}
    done = {**responses_rules.response(request, Behavior(), 2048, ENC), "metadata": {"usage": tag}}
    for data in (orjson.dumps(done), b"".join(responses_rules.events(done))):
        usage = RESPONSES.usage(data[-16 * 1024 :])
        assert usage is not None
        assert (usage.input_tokens, usage.cached_tokens) == (2048, 1024)


def test_a_stream_cut_before_completion_has_no_usage() -> None:
    done = responses_rules.response({"model": "m"}, Behavior(), 10, ENC)
    assert RESPONSES.usage(b"".join(responses_rules.events(done)[:-1])) is None


def test_assembly_reads_text_calls_and_status() -> None:
    request = {"model": "gpt-4.1", "input": [r.user()]}
    said = responses_rules.response(request, Behavior(reply="Hi there, you."), 5, ENC)
    call = ToolCall("read_file", '{"path": "a.py"}', "call_1")
    called = responses_rules.response(request, Behavior(tool_calls=(call,)), 5, ENC)
    for data in (orjson.dumps(said), b"".join(responses_rules.events(said))):
        assembled = RESPONSES.assemble(data)
        assert assembled.text == "Hi there, you."
        assert assembled.finish_reason == "completed"
        assert assembled.usage == said["usage"]
    assembled = RESPONSES.assemble(b"".join(responses_rules.events(called)))
    assert assembled.tool_calls == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "read_file", "arguments": call.arguments},
        }
    ]


def test_a_cut_stream_assembles_what_arrived() -> None:
    done = responses_rules.response({"model": "m"}, Behavior(reply="one two three"), 5, ENC)
    events = responses_rules.events(done)
    cut = b"".join(events[:5])
    assembled = RESPONSES.assemble(cut)
    assert assembled.text == "one two three"[: len(assembled.text)]
    assert assembled.text
    assert assembled.usage is None


ITEM_CHOICES = [
    r.user(),
    r.assistant(),
    r.developer(),
    r.reasoning(),
    r.function_call("a"),
    r.function_call("b"),
    r.function_output("a"),
    r.function_output("b"),
    r.custom_call("c"),
    r.custom_output("c"),
    {"type": "mystery"},
    1,
]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(ITEM_CHOICES), max_size=7))
def test_every_skip_reason_is_one_the_protocol_declares(items: list[object]) -> None:
    """The skipped-requests metric names only declared reasons; any other is `other`."""
    request = RESPONSES.parse(body(input=items), LIMITS)
    assert request.skip is None or request.skip in RESPONSES.skip_reasons
