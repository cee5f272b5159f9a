"""One group of Responses items as one neutral chat message (the general functions)."""

from __future__ import annotations

import orjson

from proxy.protocols.responses.neutral import GROUP, full_group, group_message
from tests.fakes import responses_items as r


def test_a_reasoning_item_rides_in_front_of_the_message_it_precedes() -> None:
    items = [r.reasoning(1), r.assistant("Done.", 1)]
    group = full_group(items, "message", (0, 1))
    assert not group.editable  # the two stand or fall together; neither is edited
    message = group_message(items, group, 4)
    assert message == {
        "role": "assistant",
        "content": [items[0], {"type": "text", "text": "Done."}],
        GROUP: 4,
    }


def test_calls_alone_carry_their_reasoning_as_content() -> None:
    items = [r.reasoning(2), r.function_call("a"), r.function_call("b")]
    group = full_group(items, "calls", (0, 1, 2))
    message = group_message(items, group, 0)
    assert message["content"] == [items[0]]
    assert [c["id"] for c in message["tool_calls"]] == ["a", "b"]
    assert message["tool_calls"][0]["function"] == {
        "name": items[1]["name"],
        "arguments": items[1]["arguments"],
    }


def test_a_custom_or_shell_call_is_priced_by_its_json_and_never_edited() -> None:
    custom, shell = r.custom_call("c"), r.shell_call("s")
    group = full_group([custom, shell], "calls", (0, 1))
    calls = group_message([custom, shell], group, 0)["tool_calls"]
    assert calls[0] == {
        "id": "c",
        "type": "custom",
        "custom": {"name": custom["name"], "input": custom["input"]},
    }
    assert calls[1]["type"] == "custom"
    assert calls[1]["custom"]["name"] == "local_shell_call"
    assert orjson.loads(calls[1]["custom"]["input"])["action"] == shell["action"]


def test_an_opaque_item_is_an_assistant_message_holding_it() -> None:
    item = r.item_reference(1)
    group = full_group([item], "opaque", (0,))
    assert not group.editable
    assert group_message([item], group, 2) == {"role": "assistant", "content": [item], GROUP: 2}


def test_an_output_that_is_not_text_is_kept_whole() -> None:
    output = r.computer_output("cu")
    group = full_group([output], "output", (0,))
    assert not group.editable
    message = group_message([output], group, 1)
    assert (message["role"], message["tool_call_id"], message["content"]) == (
        "tool",
        "cu",
        [output],
    )
