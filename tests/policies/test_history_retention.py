from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from policies import invariants
from policies.base import PinSpec
from policies.describe import content_chars, describe, describe_text, size_label
from policies.errors import ParamError
from policies.history_retention import HistoryRetention, removed, summary
from tests.factories import (
    assistant,
    assistant_calls,
    counter,
    ctx,
    function_call,
    function_result,
    image_part,
    long_text,
    system,
    text_part,
    tool_result,
    user,
)

Msgs = list[dict[str, Any]]
BIG = long_text(2000)  # about 18 KB of plain words


# -- descriptions ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n_bytes", "label"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1 KB"), (18_500, "18 KB"), (3 * 2**20, "3.0 MB")],
)
def test_size_label(n_bytes: int, label: str) -> None:
    assert size_label(n_bytes) == label


CSV = "id,name,amount\n" + "\n".join(f"{i},item{i},{i * 3}" for i in range(120))
TSV = "\n".join(f"{i}\titem{i}\t{i * 3}" for i in range(40))
MARKDOWN = "| a | b |\n|---|---|\n" + "\n".join(f"| {i} | {i * 2} |" for i in range(30))
LOG = "\n".join(
    f"2024-05-01 12:00:{i % 60:02d} {'ERROR' if i % 10 == 0 else 'INFO'} worker did {i}"
    for i in range(50)
)
CODE = "\n".join(["import os", "", "def main() -> None:", "    x = 1", "    return x"] * 8)
NUMBERED = "\n".join(f"{i:6d}\t{line}" for i, line in enumerate(CODE.splitlines(), 1))
HITS = "\n".join(f"src/mod{i % 4}.py:{i}:    call(x)" for i in range(25))
PYTEST = "===== test session starts =====\ncollected 5 items\n\nt.py ..F..\n" + (
    "===== 1 failed, 4 passed in 0.12s ====="
)
PROSE = "The quick brown fox jumps over the lazy dog.\nIt was not amused.\nThe end."


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (json.dumps({f"k{i}": i for i in range(12)}), "json: object with 12 keys"),
        (json.dumps(list(range(3))), "json: array of 3 items"),
        ("[1, 2", "text: 1 line, 2 words"),
        (CSV, "table: 121 rows"),
        (TSV, "table: 40 rows"),
        (MARKDOWN, "table: 30 rows"),
        (LOG, "log: 50 lines, 5 error lines"),
        (CODE, "code: 32 lines"),
        (NUMBERED, "code: 40 lines"),
        (HITS, "search hits: 25 lines in 4 files"),
        (PYTEST, "test output: 4 lines, 1 failed, 4 passed"),
        (base64.b64encode(bytes(range(256)) * 4).decode(), "base64 blob"),
        ("\x00\x01\x02binary\x03\x04" * 20, "binary data"),
        ("data:image/png;base64,iVBORw0KGgo=", "image: image/png data URL"),
        ("data:application/pdf;base64,JVBERi0=", "data URL: application/pdf"),
        (PROSE, "text: 3 lines, 15 words"),
    ],
)
def test_describe_text_names_the_kind(text: str, expected: str) -> None:
    assert describe_text(text) == expected


def test_describe_adds_the_size_and_counts_parts() -> None:
    assert describe(CSV) == f"table: 121 rows, ~{size_label(len(CSV))}"
    url = "data:image/png;base64," + "A" * 5000
    parts = [text_part(PROSE), image_part(url), {"type": "input_audio", "input_audio": {}}]
    assert describe(parts).startswith("text: 3 lines, 15 words + 1 image + 1 other part, ~5 KB")
    assert describe([image_part(url)]) == "1 image, ~5 KB"
    assert describe(None) == "empty content, ~0 B"
    assert content_chars(parts) == len(PROSE) + len(url) + len("low") + len("input_audio") + len(
        "text"
    ) + len("image_url")


def test_describe_never_raises_on_odd_input() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert describe_text(deep).startswith("text")
    assert describe_text("") == "text: 0 lines, 0 words"
    assert describe([1, None, {"text": 3}]) == "1 other part, ~0 B"
    assert describe([]) == "empty content, ~0 B"
    nested: Any = "x"
    for _ in range(5000):
        nested = [nested]
    assert content_chars(nested) == 1


# -- the curator -----------------------------------------------------------------------


def session(big_user: Any = BIG, big_tool: Any = BIG) -> Msgs:
    """Turn 0 has a big user paste and a big tool result; turns 1-2 are small."""
    return [
        system(),
        user(big_user),
        assistant_calls("c1"),
        tool_result("c1", big_tool),
        assistant("Read it."),
        user("What now?"),
        assistant("This."),
        user("Thanks."),
    ]


def test_summary_mode_describes_big_old_contents() -> None:
    messages = session()
    out = HistoryRetention().curate(messages, ctx())
    assert out.messages[1] == user(summary(BIG))
    assert out.messages[1]["content"] == (
        "[text: 1 line, 2,000 words, ~18 KB; omitted from history by context-curator]"
    )
    assert out.messages[3] == tool_result("c1", summary(BIG))
    unchanged = [0, 2, 4, 5, 6, 7]
    assert [out.messages[i] for i in unchanged] == [messages[i] for i in unchanged]
    first, second = out.actions
    assert (first.curator, first.kind, first.indexes) == ("history_retention", "replace", (1,))
    assert first.reason == "user content of ~18 KB in an older turn replaced by a description"
    before = counter().count_message(messages[1], "gpt-4o")
    assert first.tokens_removed == before - counter().count_message(out.messages[1], "gpt-4o")
    assert second.indexes == (3,)
    assert invariants.check(messages, out.messages, ctx()) == []


def test_recent_turns_and_small_contents_are_kept() -> None:
    messages = session()
    assert HistoryRetention(keep_recent_turns=3).curate(messages, ctx()).actions == ()
    exact = "x" * 10_000
    assert HistoryRetention().curate(session(exact, exact), ctx()).actions == ()
    assert len(HistoryRetention().curate(session(exact + "x", exact), ctx()).actions) == 1


def test_full_mode_keeps_a_role_as_is() -> None:
    out = HistoryRetention(user="full").curate(session(), ctx())
    assert [a.indexes for a in out.actions] == [(3,)]


def test_drop_mode_leaves_a_minimal_placeholder_in_a_tool_result() -> None:
    out = HistoryRetention(user="full", tool="drop").curate(session(), ctx())
    assert out.messages[3] == tool_result("c1", "[tool result removed: ~18 KB]")
    assert out.actions[0].reason.endswith("replaced by a placeholder")


def test_drop_mode_removes_a_user_message_only_when_a_user_message_follows() -> None:
    messages = [user(BIG), user("And this question?"), assistant("ok"), user("a"), user("b")]
    out = HistoryRetention(user="drop", keep_recent_turns=2).curate(messages, ctx())
    assert out.messages == messages[1:]
    (action,) = out.actions
    assert (action.kind, action.indexes) == ("drop", (0,))
    assert action.tokens_removed == counter().count_message(messages[0], "gpt-4o")
    assert action.reason == "user content of ~18 KB in an older turn removed"
    # Followed by the assistant's reply: the message stays, so the reply still answers it.
    messages = session()
    out = HistoryRetention(user="drop", tool="full").curate(messages, ctx())
    assert (
        out.messages[1]
        == user(removed("user message", BIG))
        == user("[user message removed: ~18 KB]")
    )


def test_legacy_function_results_follow_the_tool_mode() -> None:
    messages = [user("go"), function_call(), function_result(content=BIG), user("a"), user("b")]
    out = HistoryRetention(tool="drop").curate(messages, ctx())
    assert out.messages[2] == function_result(content="[tool result removed: ~18 KB]")


def test_image_data_urls_count_towards_the_threshold() -> None:
    url = "data:image/png;base64," + "A" * 20_000
    messages = session(big_user=[text_part("see this"), image_part(url)], big_tool="ok")
    out = HistoryRetention().curate(messages, ctx())
    assert out.messages[1]["content"] == (
        "[text: 1 line, 2 words + 1 image, ~20 KB; omitted from history by context-curator]"
    )


def test_pinned_and_assistant_messages_are_never_touched() -> None:
    messages = session()
    messages[4] = assistant(BIG)
    out = HistoryRetention().curate(messages, ctx(pins=PinSpec(first_user=True)))
    assert [a.indexes for a in out.actions] == [(3,)]


def test_keep_recent_turns_zero_spares_only_the_last_unit() -> None:
    messages = [user("go"), assistant_calls("c1"), tool_result("c1", BIG)]
    curator = HistoryRetention(keep_recent_turns=0)
    assert curator.curate(messages, ctx()).actions == ()
    messages += [assistant_calls("c2"), tool_result("c2", BIG)]
    out = curator.curate(messages, ctx())
    assert [a.indexes for a in out.actions] == [(2,)]


@pytest.mark.parametrize("modes", [{}, {"user": "drop", "tool": "drop"}])
def test_curating_twice_changes_nothing_and_input_is_not_mutated(modes: dict[str, str]) -> None:
    messages = [*session(), user(BIG), user("more"), assistant("x"), user("y"), user("z")]
    before = copy.deepcopy(messages)
    curator = HistoryRetention(threshold_chars=256, **modes)  # type: ignore[arg-type]
    out = curator.curate(messages, ctx())
    assert messages == before
    assert out.actions
    again = curator.curate(out.messages, ctx())
    assert again.messages == out.messages
    assert again.actions == ()
    assert invariants.check(messages, out.messages, ctx()) == []


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"threshold_chars": 255}, "threshold_chars", "must be >= 256"),
        ({"threshold_chars": "10k"}, "threshold_chars", "an integer"),
        ({"keep_recent_turns": -1}, "keep_recent_turns", "must be >= 0"),
        ({"user": "keep"}, "user", "must be one of full, summary, drop, got 'keep'"),
        ({"tool": None}, "tool", "must be one of full, summary, drop"),
    ],
)
def test_bad_parameters_are_rejected(kwargs: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(ParamError) as info:
        HistoryRetention(**kwargs)
    assert info.value.field == field
    assert message in info.value.message
