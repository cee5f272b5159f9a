"""Curated neutral messages back to Responses `input` items (`rebuild`): unchanged messages
give back the client's very objects, changes land in the client's shape, dropped messages
take all their items along, and curator-written messages become plain message items."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.protocols.responses.items import GROUP, INSTRUCTIONS, Mapped, to_neutral
from proxy.protocols.responses.rebuild import rebuild
from tests.fakes import responses_items as r

Items = list[dict[str, Any]]
Msg = dict[str, Any]


def mapped(items: Items, instructions: object = None) -> Mapped:
    out = to_neutral(items, instructions)
    assert isinstance(out, Mapped), out
    return out


def same_objects(back: list[Any], expected: list[Any]) -> bool:
    return len(back) == len(expected) and all(a is b for a, b in zip(back, expected, strict=True))


def with_content(msg: Msg, content: object) -> Msg:
    return {**msg, "content": content}


def with_arguments(msg: Msg, arguments: dict[str, str]) -> Msg:
    """`msg` with the named calls' arguments replaced (a copy: curators never mutate)."""
    calls = [
        {**c, "function": {**c["function"], "arguments": arguments[c["id"]]}}
        if c["id"] in arguments
        else c
        for c in msg["tool_calls"]
    ]
    return {**msg, "tool_calls": calls}


def agent_history() -> Items:
    """Messages, a reasoning-led assistant turn with parallel calls, a custom call, a
    computer call (its output an object), an opaque item and a reasoning-led answer."""
    return [
        r.developer(),  # group 0: message
        r.user_parts(),  # 1: message, text + image parts
        r.reasoning(1),  # 2: calls: reasoning, assistant message, two function calls
        r.assistant("Reading both.", 1),
        r.function_call("a"),
        r.function_call("b", args='{"path": "b.py"}'),
        r.function_output("b", "B" * 40),  # 3: output, a string
        # 4: output, one text part
        r.function_output("a", [{"type": "input_text", "text": "A" * 40}]),  # type: ignore[arg-type]
        r.custom_call("c"),  # 5: calls, no primary
        r.custom_output("c"),  # 6: output
        r.computer_call("k"),  # 7: calls
        r.computer_output("k"),  # 8: output, not editable (an object)
        r.item_reference(1),  # 9: opaque
        r.reasoning(2),  # 10: message with a reasoning rider (not editable)
        r.assistant("Done.", 2),
        r.user("Thanks"),  # 11: message, a string
    ]


# -- unchanged ----------------------------------------------------------------------------


@pytest.mark.parametrize("instructions", [None, "Be brief.", {"text": "odd shape"}])
def test_unchanged_messages_give_back_the_very_same_items(instructions: object) -> None:
    items = agent_history()
    m = mapped(items, instructions)
    assert same_objects(rebuild(m, m.messages), items)


def test_the_instructions_message_is_never_written_back() -> None:
    items = [r.user("hi")]
    m = mapped(items, "Be brief.")
    assert m.messages[0][GROUP] == INSTRUCTIONS
    assert same_objects(rebuild(m, m.messages), items)
    # Even a changed one: the field goes upstream as the client sent it.
    changed = with_content(m.messages[0], "Be verbose.")
    assert same_objects(rebuild(m, [changed, m.messages[1]]), items)


def test_an_empty_curation_gives_an_empty_input() -> None:
    m = mapped([r.user("hi")], "Be brief.")
    assert rebuild(m, []) == []


def test_a_copy_that_changes_nothing_gives_back_equal_items() -> None:
    items = agent_history()
    m = mapped(items)
    copies = [dict(msg) for msg in m.messages]  # new dicts, the same content objects
    back = rebuild(m, copies)
    assert back == items
    # The client's own objects, string outputs too (the fast path compares the text).
    assert all(a is b for a, b in zip(back, items, strict=True))


# -- dropped ------------------------------------------------------------------------------


def test_a_dropped_group_takes_all_its_items_with_it() -> None:
    items = agent_history()
    m = mapped(items)
    # Drop the reasoning-led call turn and both its outputs (groups 2, 3, 4).
    kept = [msg for msg in m.messages if msg[GROUP] not in (2, 3, 4)]
    back = rebuild(m, kept)
    assert same_objects(back, items[:2] + items[8:])


def test_dropping_a_reasoning_led_message_drops_its_reasoning_too() -> None:
    items = agent_history()
    m = mapped(items)
    kept = [msg for msg in m.messages if msg[GROUP] != 10]
    back = rebuild(m, kept)
    assert same_objects(back, items[:13] + items[15:])
    assert all(item.get("type") != "reasoning" or item is items[2] for item in back)


def test_items_come_back_in_the_curated_order() -> None:
    items = [r.user("one"), r.user("two"), r.user("three")]
    m = mapped(items)
    back = rebuild(m, [m.messages[2], m.messages[0]])
    assert same_objects(back, [items[2], items[0]])


# -- changed ------------------------------------------------------------------------------


def test_a_shortened_string_output_keeps_every_other_field() -> None:
    items = agent_history()
    m = mapped(items)
    curated = list(m.messages)
    curated[3] = with_content(m.messages[3], "B…")
    back = rebuild(m, curated)
    assert back[6] == {"type": "function_call_output", "call_id": "b", "output": "B…"}
    assert back[6] is not items[6]
    assert items[6]["output"] == "B" * 40  # the client's item is not mutated
    assert same_objects(back[:6] + back[7:], items[:6] + items[7:])


def test_a_shortened_list_output_goes_back_into_the_clients_text_part() -> None:
    items = agent_history()
    m = mapped(items)
    assert m.messages[4]["content"] == "A" * 40  # one text part: its text, as chat has it
    curated = list(m.messages)
    curated[4] = with_content(m.messages[4], "A…")
    back = rebuild(m, curated)
    assert back[7] == {**items[7], "output": [{"type": "input_text", "text": "A…"}]}


def test_a_changed_string_message_is_written_into_its_item() -> None:
    items = [r.developer("Answer tersely."), r.user("a long question " * 5)]
    m = mapped(items)
    back = rebuild(m, [m.messages[0], with_content(m.messages[1], "a question")])
    assert back[0] is items[0]
    assert back[1] == {"role": "user", "content": "a question"}


def test_a_changed_text_part_reuses_the_clients_part_and_keeps_the_rest() -> None:
    items = [r.user_parts("What is this long thing?")]
    m = mapped(items)
    _text, image = m.messages[0]["content"]
    cut = with_content(m.messages[0], [{"type": "text", "text": "What?"}, image])
    back = rebuild(m, [cut])
    original_text, original_image = items[0]["content"]
    assert back[0]["content"] == [{**original_text, "text": "What?"}, original_image]
    assert back[0]["content"][1] is original_image
    assert {k: v for k, v in back[0].items() if k != "content"} == {
        "type": "message",
        "role": "user",
    }


def test_a_dropped_part_is_dropped_from_the_item() -> None:
    items = [r.user_parts()]
    m = mapped(items)
    text, _image = m.messages[0]["content"]
    back = rebuild(m, [with_content(m.messages[0], [text])])
    assert back == [{**items[0], "content": [items[0]["content"][0]]}]


def test_a_changed_assistant_text_keeps_its_annotations_and_ids() -> None:
    items = [r.user("hi"), r.assistant("A long answer.", 7)]
    m = mapped(items)
    back = rebuild(m, [m.messages[0], with_content(m.messages[1], "Answer.")])
    part = items[1]["content"][0]
    assert back[1] == {**items[1], "content": [{**part, "text": "Answer."}]}
    assert back[1]["id"] == "msg_7"


def test_cleared_arguments_go_into_their_function_call_only() -> None:
    items = agent_history()
    m = mapped(items)
    curated = list(m.messages)
    curated[2] = with_arguments(m.messages[2], {"b": "{}"})
    back = rebuild(m, curated)
    assert back[5] == {**items[5], "arguments": "{}"}
    # The reasoning, the message and the other call are the client's objects.
    assert same_objects(back[2:5], items[2:5])
    assert same_objects(back[6:], items[6:])


def test_arguments_equal_to_the_clients_keep_the_same_call_object() -> None:
    items = [r.user(), r.function_call("a"), r.function_output("a")]
    m = mapped(items)
    same = with_arguments(m.messages[1], {"a": items[1]["arguments"]})
    back = rebuild(m, [m.messages[0], same, m.messages[2]])
    assert same_objects(back, items)


def test_a_call_taken_out_of_tool_calls_goes_with_it() -> None:
    items = [r.user(), r.function_call("a"), r.function_call("b"), r.function_output("b")]
    items.insert(3, r.function_output("a"))
    m = mapped(items)
    head = m.messages[1]
    only_b = {**head, "tool_calls": [c for c in head["tool_calls"] if c["id"] == "b"]}
    tool_b = next(msg for msg in m.messages if msg.get("tool_call_id") == "b")
    back = rebuild(m, [m.messages[0], only_b, tool_b])
    assert same_objects(back, [items[0], items[2], items[4]])


def test_calls_sharing_an_id_are_matched_in_order() -> None:
    items = [r.user(), r.function_call("x"), r.function_call("x"), r.function_output("x")]
    items.append(r.function_output("x"))
    m = mapped(items)
    head = m.messages[1]
    first, second = head["tool_calls"]
    changed = {
        **head,
        "tool_calls": [first, {**second, "function": {**second["function"], "arguments": "{}"}}],
    }
    back = rebuild(m, [m.messages[0], changed, *m.messages[2:]])
    assert back[1] is items[1]
    assert back[2] == {**items[2], "arguments": "{}"}


def test_of_calls_sharing_an_id_only_as_many_as_remain_are_kept() -> None:
    items = [r.user(), r.function_call("x"), r.function_call("x"), r.function_output("x")]
    items.append(r.function_output("x"))
    m = mapped(items)
    head = m.messages[1]
    one = {**head, "tool_calls": head["tool_calls"][:1]}
    back = rebuild(m, [m.messages[0], one, m.messages[2]])
    assert same_objects(back, [items[0], items[1], items[3]])


def test_a_custom_calls_input_is_never_rewritten() -> None:
    items = [r.user(), r.custom_call("c"), r.custom_output("c")]
    m = mapped(items)
    head = m.messages[1]
    call = head["tool_calls"][0]
    changed = {**head, "tool_calls": [{**call, "custom": {**call["custom"], "input": ""}}]}
    back = rebuild(m, [m.messages[0], changed, m.messages[2]])
    assert same_objects(back, items)


# -- changes that cannot be written back --------------------------------------------------


def test_a_change_to_a_reasoning_led_message_keeps_the_original_items() -> None:
    items = agent_history()
    m = mapped(items)
    curated = list(m.messages)
    curated[10] = with_content(m.messages[10], "Done (edited).")
    assert same_objects(rebuild(m, curated), items)


def test_a_change_to_an_opaque_item_keeps_it_verbatim() -> None:
    items = agent_history()
    m = mapped(items)
    curated = list(m.messages)
    curated[9] = with_content(m.messages[9], "gone")
    assert same_objects(rebuild(m, curated), items)


def test_a_change_to_an_object_output_keeps_it_verbatim() -> None:
    items = agent_history()
    m = mapped(items)
    curated = list(m.messages)
    curated[8] = with_content(m.messages[8], "screenshot removed")
    assert same_objects(rebuild(m, curated), items)


@pytest.mark.parametrize(
    "content",
    [None, 42, [{"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}]],
    ids=["none", "number", "a-new-image"],
)
def test_content_the_clients_shape_cannot_hold_keeps_the_original_item(content: object) -> None:
    items = [r.user_parts()]
    m = mapped(items)
    back = rebuild(m, [with_content(m.messages[0], content)])
    assert same_objects(back, items)


def test_a_string_output_cut_into_parts_keeps_the_original_output() -> None:
    items = [r.user(), r.function_call("a"), r.function_output("a", "x" * 50)]
    m = mapped(items)
    parts = with_content(m.messages[2], [{"type": "text", "text": "x"}])
    assert same_objects(rebuild(m, [m.messages[0], m.messages[1], parts]), items)


# -- curator-written messages -------------------------------------------------------------


def test_a_summary_becomes_a_message_item_of_its_role() -> None:
    items = [r.user("one"), r.assistant("two", 1), r.user("three")]
    m = mapped(items, "Be brief.")
    summary = {"role": "assistant", "content": "[Summary] one, two"}
    back = rebuild(m, [m.messages[0], summary, m.messages[3]])
    assert back == [{"role": "assistant", "content": "[Summary] one, two"}, items[2]]
    assert back[1] is items[2]


def test_a_written_message_without_role_or_content_is_an_empty_user_message() -> None:
    m = mapped([r.user()])
    assert rebuild(m, [{}]) == [{"role": "user", "content": ""}]


def test_only_role_and_content_of_a_written_message_are_kept() -> None:
    m = mapped([r.user()])
    written = {"role": "system", "content": "note", "name": "curator", "extra": 1}
    assert rebuild(m, [written]) == [{"role": "system", "content": "note"}]


@pytest.mark.parametrize(
    "group",
    [2, 99, -2, "0", 0.0, True, None],
    ids=["count", "far", "negative", "str", "float", "bool", "none"],
)
def test_a_group_that_names_no_items_is_a_written_message(group: object) -> None:
    items = [r.user("one"), r.user("two")]  # groups 0 and 1: 2 is one past the end
    m = mapped(items)
    msg = {"role": "assistant", "content": "x", GROUP: group}
    assert rebuild(m, [msg]) == [{"role": "assistant", "content": "x"}]


def test_the_last_group_index_still_names_its_items() -> None:
    items = [r.user("one"), r.user("two")]
    m = mapped(items)
    assert same_objects(rebuild(m, [m.messages[1]]), [items[1]])
    edited = {"role": "user", "content": "2", GROUP: 1}
    assert rebuild(m, [edited]) == [{"role": "user", "content": "2"}]


def test_a_stray_instructions_message_is_skipped_even_without_instructions() -> None:
    m = mapped([r.user()])
    stray = {"role": "system", "content": "x", GROUP: INSTRUCTIONS}
    assert same_objects(rebuild(m, [stray, m.messages[0]]), [m.items[0]])


# -- properties ---------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(r.conversations(), st.sampled_from([None, "Be brief."]), st.data())
def test_any_kept_subset_gives_back_exactly_its_groups_items(
    items: Items, instructions: str | None, data: st.DataObject
) -> None:
    m = mapped(items, instructions)
    keep = data.draw(st.lists(st.booleans(), min_size=len(m.messages), max_size=len(m.messages)))
    kept = [msg for msg, k in zip(m.messages, keep, strict=True) if k]
    expected = [items[i] for msg in kept if msg[GROUP] != INSTRUCTIONS for i in m.ids[msg[GROUP]]]
    assert same_objects(rebuild(m, kept), expected)


@settings(max_examples=60, deadline=None)
@given(r.conversations(), st.data(), st.text(max_size=20))
def test_a_cut_string_output_changes_that_item_alone(
    items: Items, data: st.DataObject, text: str
) -> None:
    m = mapped(items)
    outputs = [
        n
        for n, (k, ids) in enumerate(zip(m.kinds, m.ids, strict=True))
        if k == "output" and type(items[ids[-1]].get("output")) is str
    ]
    if not outputs:
        assert same_objects(rebuild(m, m.messages), items)
        return
    n = data.draw(st.sampled_from(outputs))
    at = m.group(n).primary
    curated = [with_content(msg, text) if msg[GROUP] == n else msg for msg in m.messages]
    back = rebuild(m, curated)
    assert back[at] == {**items[at], "output": text}
    assert same_objects(back[:at] + back[at + 1 :], items[:at] + items[at + 1 :])
