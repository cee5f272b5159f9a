"""simulate_input.py: how `curator simulate` reads its INPUT (JSON, JSONL, audit records,
Responses requests) into `Request`s, and the one-line errors it gives for bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.cli.simulate_input import (
    Request,
    SimulateError,
    read_requests,
    requests_of_records,
)
from proxy.protocols.responses.neutral import GROUP, INSTRUCTIONS
from tests.factories import assistant, system, user

Msg = dict[str, Any]
PATH = "in.jsonl"


def lines(*items: object) -> str:
    return "".join(json.dumps(item) + "\n" for item in items)


def error_of(text: str) -> str:
    with pytest.raises(SimulateError) as info:
        read_requests(PATH, text)
    return str(info.value)


# -- one JSON value --------------------------------------------------------------------


def test_a_chat_request_is_one_request_on_its_first_nonblank_line() -> None:
    body = {"model": "gpt-4o", "messages": [system(), user()], "max_tokens": 50}
    text = "\n  \n" + json.dumps(body, indent=2)
    assert read_requests(PATH, text) == [Request(3, body)]


def test_a_bare_message_array_is_one_request_without_a_model() -> None:
    messages = [user("Hi"), assistant("Hello")]
    (request,) = read_requests(PATH, json.dumps(messages))
    assert request == Request(1, {"messages": messages})
    assert request.model == ""


def test_an_array_of_requests_gives_each_the_arrays_line() -> None:
    first = {"model": "a", "messages": [user("1")]}
    second = {"model": "b", "messages": [user("2")]}
    text = "\n" + json.dumps([first, second], indent=1)
    assert read_requests(PATH, text) == [Request(2, first), Request(2, second)]


@pytest.mark.parametrize(("item", "kind"), [(7, "a number"), ([], "an array")])
def test_an_array_item_that_is_not_a_request_is_named_by_its_index(item: object, kind: str) -> None:
    text = json.dumps([{"messages": []}, item])
    assert error_of(text) == (
        f"in.jsonl: [1]: expected a chat request or an audit record (a JSON object), got {kind}"
    )


def test_an_array_mixing_messages_and_other_values_is_read_as_requests() -> None:
    # Not every item is a message, so the items are requests; a message is not one.
    assert error_of(json.dumps([user("Hi"), "hi"])) == (
        'in.jsonl: [0]: expected a chat request with a "messages" list, a "request" object, '
        'or an audit record with an "original" list; found keys: role, content'
    )


def test_an_empty_array_holds_no_requests() -> None:
    assert error_of("[]") == "in.jsonl: holds no requests"


@pytest.mark.parametrize("text", ["", "\n", "  \n\t\n"])
def test_empty_input(text: str) -> None:
    assert error_of(text) == "in.jsonl: empty input; expected a chat request as JSON, or JSONL"


def test_invalid_json_over_several_lines_names_the_line_of_the_problem() -> None:
    text = '{\n  "model": "x",\n  "messages": [\n    {"role": "user",}\n  ]\n}'
    assert error_of(text) == (
        "in.jsonl:4: invalid JSON: Expecting property name enclosed in double quotes"
    )


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (None, "null"),
        ("hi", "a string"),
        (True, "a boolean"),
        (3, "a number"),
        (2.5, "a number"),
    ],
)
def test_a_value_that_is_no_object_is_refused_by_its_kind(value: object, kind: str) -> None:
    assert error_of(json.dumps(value)) == (
        f"in.jsonl: expected a chat request or an audit record (a JSON object), got {kind}"
    )


@pytest.mark.parametrize(
    ("item", "keys"),
    [
        ({}, "none"),
        ({"model": "x", "prompt": "hi"}, "model, prompt"),
        ({"messages": "hi", "original": {}}, "messages, original"),
    ],
)
def test_an_object_that_is_no_request_lists_its_keys(item: Msg, keys: str) -> None:
    assert error_of(json.dumps(item)) == (
        'in.jsonl: expected a chat request with a "messages" list, a "request" object, '
        f'or an audit record with an "original" list; found keys: {keys}'
    )


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("hi", "a string"),
        ({"role": 1}, "an object"),
        ({"content": "x"}, "an object"),
        (None, "null"),
    ],
)
def test_a_message_without_a_role_is_named_by_its_index(message: object, kind: str) -> None:
    body = {"messages": [user(), message]}
    assert error_of(json.dumps(body)) == (
        f'in.jsonl: messages[1]: expected an object with a "role", got {kind}'
    )


# -- JSONL -----------------------------------------------------------------------------


def test_jsonl_lines_are_numbered_and_blank_lines_skipped() -> None:
    a = {"model": "a", "messages": [user("1")]}
    b = {"model": "b", "messages": [user("2")]}
    text = lines(a) + "\n   \n" + lines(b)
    assert read_requests(PATH, text) == [Request(1, a), Request(4, b)]


def test_a_broken_jsonl_line_names_its_line_and_column() -> None:
    text = lines({"messages": []}, {"messages": []}) + '{"messages": [\n'
    assert error_of(text) == ("in.jsonl:3: invalid JSON (column 15): Expecting value")


def test_a_jsonl_line_that_is_not_a_request_names_its_line() -> None:
    assert error_of(lines({"messages": []}, [1, 2])) == (
        "in.jsonl:2: expected a chat request or an audit record (a JSON object), got an array"
    )


def test_summarizer_records_are_skipped_and_input_of_only_them_is_an_error() -> None:
    call = {"kind": "summarizer", "original": [user("Summarize")]}
    chat = {"kind": "chat", "model": "m", "original": [user("Hi")]}
    (request,) = read_requests(PATH, lines(call, chat, call))
    assert (request.line, request.messages) == (2, [user("Hi")])
    assert error_of(lines(call, call)) == (
        "in.jsonl: no chat requests (only audit records of summarizer calls)"
    )


# -- wrapped requests ------------------------------------------------------------------


def test_a_wrapped_request_takes_the_outer_model_unless_it_has_its_own() -> None:
    inner = {"messages": [user()]}
    (request,) = read_requests(PATH, json.dumps({"model": "outer", "request": inner}))
    assert request.body == {"model": "outer", "messages": [user()]}
    own = {"model": "inner", "messages": [user()]}
    (request,) = read_requests(PATH, json.dumps({"model": "outer", "body": own}))
    assert request.body == own


def test_request_is_preferred_over_body_and_messages_over_both() -> None:
    a = {"model": "a", "messages": [user("a")]}
    b = {"model": "b", "messages": [user("b")]}
    (request,) = read_requests(PATH, json.dumps({"request": a, "body": b}))
    assert request.model == "a"
    outer = {"model": "c", "messages": [user("c")], "request": a}
    (request,) = read_requests(PATH, json.dumps(outer))
    assert request.body == outer


def test_a_wrapper_whose_inner_object_is_no_request_reports_the_inner_keys() -> None:
    assert error_of(json.dumps({"request": {"prompt": "hi"}})) == (
        'in.jsonl: expected a chat request with a "messages" list, a "request" object, '
        'or an audit record with an "original" list; found keys: model, prompt'
    )


# -- Responses requests ----------------------------------------------------------------


def test_a_responses_request_is_read_as_its_chat_view() -> None:
    item = {
        "model": "m",
        "instructions": "Be brief.",
        "input": [{"role": "user", "content": "Hi"}],
        "max_output_tokens": 300,
        "tools": [{"type": "function", "name": "ls"}],
    }
    (request,) = read_requests(PATH, json.dumps(item))
    assert request.body == {
        "model": "m",
        "max_completion_tokens": 300,
        "tools": [{"type": "function", "function": {"name": "ls"}}],
        "messages": [
            {"role": "system", "content": "Be brief.", GROUP: INSTRUCTIONS},
            {"role": "user", "content": "Hi", GROUP: 0},
        ],
    }


@pytest.mark.parametrize(
    ("items", "reason"),
    [
        ([{"role": "user", "content": "Hi"}, {"type": "function_call_output", "call_id": "x"}],
         "unpaired_output"),
        (["text"], "bad_items"),
    ],
)  # fmt: skip
def test_a_responses_request_the_proxy_would_not_curate_is_an_error(
    items: list[object], reason: str
) -> None:
    assert error_of(json.dumps({"model": "m", "input": items})) == (
        f"in.jsonl: a Responses request the proxy forwards uncurated: {reason}"
    )


def test_a_messages_list_wins_over_an_input_list() -> None:
    body = {"messages": [user()], "input": "not read"}
    assert read_requests(PATH, json.dumps(body)) == [Request(1, body)]


# -- audit records ---------------------------------------------------------------------


def test_an_audit_record_keeps_tools_positive_output_limits_window_and_encoding() -> None:
    tools = [{"type": "function", "function": {"name": "ls"}}]
    record = {
        "id": "r1",
        "kind": "chat",
        "model": "gpt-4o",
        "original": [user()],
        "curated": [],
        "tools": tools,
        "max_tokens": 100,
        "max_completion_tokens": 0,
        "max_output_tokens": True,
        "context_window": 8000,
        "encoding": "o200k_base",
    }
    (request,) = read_requests(PATH, json.dumps(record))
    assert request == Request(
        1,
        {"model": "gpt-4o", "messages": [user()], "tools": tools, "max_tokens": 100},
        8000,
        "o200k_base",
    )


@pytest.mark.parametrize(
    ("window", "encoding"),
    [(0, ""), (-5, None), (True, 7), (1.5, ["o200k_base"]), ("8000", "")],
)
def test_an_audit_records_odd_window_or_encoding_is_none(window: object, encoding: object) -> None:
    record = {"original": [user()], "context_window": window, "encoding": encoding}
    (request,) = read_requests(PATH, json.dumps(record))
    assert (request.context_window, request.encoding) == (None, None)
    assert request.body == {"model": None, "messages": [user()]}


def test_an_audit_record_with_a_bad_message_names_it() -> None:
    record = {"id": "r", "original": [user(), 5]}
    assert error_of(json.dumps(record)) == (
        'in.jsonl: messages[1]: expected an object with a "role", got a number'
    )


def test_records_from_a_store_are_numbered_from_one_and_named_by_id() -> None:
    records: list[Msg] = [
        {"id": "a", "model": "m", "original": [user("1")]},
        {"id": "s", "kind": "summarizer", "original": []},
        {"id": "b", "model": "m", "original": [user("2")], "context_window": 4096},
    ]
    found = requests_of_records("audit.db", records)
    assert found == [
        Request(1, {"model": "m", "messages": [user("1")]}),
        Request(3, {"model": "m", "messages": [user("2")]}, 4096),
    ]
    with pytest.raises(SimulateError) as info:
        requests_of_records("audit.db", [*records, {"id": "x7", "original": "no"}])
    assert str(info.value) == (
        'audit.db: record x7: expected a chat request with a "messages" list, a "request" '
        'object, or an audit record with an "original" list; found keys: id, original'
    )
    with pytest.raises(SimulateError) as info:
        requests_of_records("audit.db", [records[1]])
    assert str(info.value) == (
        "audit.db: no chat requests (only audit records of summarizer calls)"
    )


# -- Request ---------------------------------------------------------------------------


def test_request_model_and_tools_tolerate_odd_values() -> None:
    assert Request(1, {"model": None, "messages": []}).model == ""
    assert Request(1, {"model": 4, "messages": []}).model == "4"
    assert Request(1, {"messages": [], "tools": {"a": 1}}).tools == []
    tool = {"type": "function", "function": {"name": "ls"}}
    assert Request(1, {"messages": [], "tools": [tool, "x", None]}).tools == [tool]


# -- an invariant ----------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 2)), min_size=2, max_size=8))
def test_jsonl_requests_keep_their_order_and_line_numbers(
    shape: list[tuple[bool, int]],
) -> None:
    """Each non-blank line is one request, on its own line number, blanks or not between."""
    text_lines: list[str] = []
    expected: list[Request] = []
    for k, (summarizer, blanks) in enumerate(shape):
        text_lines += [" " * b for b in range(blanks)]
        if summarizer:
            text_lines.append(json.dumps({"kind": "summarizer", "original": []}))
        else:
            body = {"model": f"m{k}", "messages": [user(f"turn {k}")]}
            text_lines.append(json.dumps(body))
            expected.append(Request(len(text_lines), body))
    text = "\n".join(text_lines)
    if expected:
        assert read_requests(PATH, text) == expected
    else:
        assert error_of(text) == (
            "in.jsonl: no chat requests (only audit records of summarizer calls)"
        )
