"""Client cache breakpoints (`cache_control` on chat parts) through every curator.

The rule (policies/marks.py, docs/cache.md): a marked part stays where it was with the
client's value while its message is kept, also when cut; text is never joined across a
breakpoint; a content replaced whole carries its last mark; curation never adds one.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import invariants
from policies.base import Curator
from policies.history_retention import HistoryRetention
from policies.marks import CACHE_CONTROL, carried, last_mark, marked
from policies.role_truncation import RoleTruncation
from policies.tool_results import ToolResultTruncation
from policies.tool_use_clearing import ToolUseClearing
from tests import factories as f
from tests.policies import examples
from tests.strategies import agent_sessions, conversations

Msgs = list[dict[str, Any]]
MARK = {"type": "ephemeral"}


def marked_part(text: str, mark: object = MARK) -> dict[str, Any]:
    return {"type": "text", "text": text, CACHE_CONTROL: mark}


def session(result: Any) -> Msgs:
    """A user turn, one call with `result` as its result, and a newer turn."""
    return [
        f.user("Look at the log."),
        f.assistant_calls(f.call("c1", "read_file", {"path": "log.txt"})),
        f.tool_result("c1", result),
        f.assistant("Read it."),
        f.user("Now fix it."),
        f.assistant("Fixed."),
        f.user("Thanks."),
    ]


LONG = f.long_text(3000, "line")


def test_carried_keeps_the_last_mark_on_what_stands_for_the_content() -> None:
    old = [f.text_part("a"), marked_part("b", {"type": "ephemeral", "ttl": "1h"})]
    assert carried(old, "[removed]") == [marked_part("[removed]", old[1][CACHE_CONTROL])]
    assert carried(old, [f.text_part("x"), f.image_part()]) == [
        marked_part("x", old[1][CACHE_CONTROL]),
        f.image_part(),
    ]
    assert carried("plain", "cut") == "cut"
    assert carried([f.text_part("a")], "cut") == "cut"


def test_a_cut_part_keeps_its_mark() -> None:
    messages = session([marked_part(LONG)])
    out = ToolResultTruncation(max_tokens=100, keep_recent=0).curate(messages, f.ctx())
    cut = out.messages[2]["content"]
    assert len(cut) == 1
    assert cut[0][CACHE_CONTROL] == MARK
    assert len(cut[0]["text"]) < len(LONG)


def test_parts_cut_as_one_carry_the_last_parts_mark() -> None:
    # Was: the joined part took the first part's keys, and the breakpoint was lost.
    messages = session([f.text_part(LONG), marked_part("exit code 1")])
    out = ToolResultTruncation(max_tokens=100, keep_recent=0).curate(messages, f.ctx())
    cut = out.messages[2]["content"]
    assert len(cut) == 1
    assert cut[0][CACHE_CONTROL] == MARK
    assert cut[0]["text"].endswith("exit code 1")


@pytest.mark.parametrize(
    "curator",
    [
        ToolResultTruncation(max_tokens=100, keep_recent=0),
        RoleTruncation(roles={"tool": {"max_chars": 200}}, keep_recent_turns=1),
    ],
    ids=repr,
)
def test_text_is_never_joined_across_a_breakpoint(curator: Curator) -> None:
    # Was: cut as one text, the mark moved onto a part that also held the text after it.
    result = [marked_part(LONG), f.text_part(LONG)]
    messages = session(result)
    out = curator.curate(messages, f.ctx())
    assert out.messages[2]["content"] == result


@pytest.mark.parametrize(
    "curator",
    [
        HistoryRetention(tool="drop", keep_recent_turns=1, threshold_chars=300),
        HistoryRetention(tool="summary", keep_recent_turns=1, threshold_chars=300),
        ToolUseClearing(trigger_tokens=10, keep=0),
    ],
    ids=repr,
)
def test_a_placeholder_keeps_the_breakpoint(curator: Curator) -> None:
    # Was: the placeholder was a plain string, and the client's breakpoint was gone.
    mark = {"type": "ephemeral", "ttl": "1h"}
    messages = session([f.text_part(LONG), marked_part("tail", mark)])
    ctx = f.ctx()
    out = curator.curate(messages, ctx)
    content = out.messages[2]["content"]
    assert content != messages[2]["content"]
    assert isinstance(content, list)
    assert len(content) == 1
    assert content[0][CACHE_CONTROL] == mark
    again = curator.curate(out.messages, ctx)
    assert again.messages == out.messages
    assert not again.actions


# -- the property: random histories with breakpoints, every registered curator -------------
@st.composite
def with_marks(draw: Any, base: st.SearchStrategy[Msgs]) -> Msgs:
    """A conversation with up to 4 of its non-empty contents marked, each mark unique.
    Each message is named, so which curated message derives from which is never in doubt."""
    messages = copy.deepcopy(draw(base))
    for i, msg in enumerate(messages):
        msg["name"] = f"m{i}"
    eligible = [i for i, m in enumerate(messages) if m.get("content")]
    chosen = draw(st.lists(st.sampled_from(eligible), max_size=4, unique=True)) if eligible else []
    for n, i in enumerate(chosen):
        content = messages[i]["content"]
        mark = {"type": "ephemeral", "n": n}
        if isinstance(content, str):
            messages[i]["content"] = [marked_part(content, mark)]
        else:
            texts = [j for j, p in enumerate(content) if p.get("type") == "text"]
            if texts:
                content[draw(st.sampled_from(texts))][CACHE_CONTROL] = mark
    return messages


def marks(content: object) -> list[tuple[int, object]]:
    if not isinstance(content, list):
        return []
    return [(j, p[CACHE_CONTROL]) for j, p in enumerate(content) if CACHE_CONTROL in p]


def assert_marks_kept(original: Msgs, curated: Msgs) -> None:
    before = [m for msg in original for _, m in marks(msg.get("content"))]
    after = [m for msg in curated for _, m in marks(msg.get("content"))]
    assert all(m in before for m in after)
    assert len(after) == len({id(m) for m in after})
    mapping = invariants.matched(original, curated)
    assert mapping is not None
    for c, o in mapping.items():
        old, new = original[o].get("content"), curated[c].get("content")
        if new == old or not marks(old):
            continue
        if isinstance(new, list) and len(new) == len(old):
            assert marks(new) == marks(old)  # parts kept: each mark on its own part
        else:  # parts replaced by one: it carries the last mark
            assert last_mark(new) == last_mark(old)
            assert len(marks(new)) == 1


@pytest.mark.parametrize("curator", examples.registered(), ids=repr)
@settings(max_examples=12, deadline=None)
@given(with_marks(st.one_of(conversations(), agent_sessions())), st.floats(0.05, 1.0))
def test_every_curator_keeps_the_clients_breakpoints(
    curator: Curator, messages: Msgs, fraction: float
) -> None:
    budget = max(1, int(fraction * f.tokens(messages)))
    ctx = examples.with_services(f.ctx(budget=budget, on_overflow="truncate"))
    out = examples.curate(curator, messages, ctx)
    assert_marks_kept(messages, list(out.messages))
    assert examples.curate(curator, out.messages, ctx).messages == out.messages


def test_what_is_not_a_message_carries_no_mark() -> None:
    # A skipped request's `messages` may hold anything; the counterfactual still reads it.
    assert not marked(5)  # type: ignore[arg-type]
    assert not marked("text")  # type: ignore[arg-type]
