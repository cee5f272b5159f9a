"""Hypothesis strategies for random conversations: realistic valid ones, and broken ones.

Valid conversations follow OpenAI's ordering rules: system/developer prefixes, users with
plain or multi-part (text + image) content, assistants with text, parallel tool calls
whose results come back in any order (sometimes 30 KB+), and legacy function calls. The
broken ones start from a valid conversation and damage it (orphans, lost results,
`tool_calls: []`, silent assistants), or are a soup of messages in no order at all.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from policies.messages import units
from tests import factories as f

Msg = dict[str, Any]
Draw = Callable[[st.SearchStrategy[Any]], Any]

TOOL_NAMES = ("search", "read_file", "run_tests", "shell")

short_text = st.one_of(
    st.sampled_from(["Hello!", "Fix the failing test.", "Done; all green.", "données", "数据 🚀"]),
    st.text(max_size=40),
)
"""Everyday message text, including empty and arbitrary unicode strings."""


@st.composite
def long_outputs(draw: Draw) -> str:
    """Tool output of hundreds to thousands of tokens; the largest are 30 KB and more."""
    word = draw(st.sampled_from(["lorem", "line", "données", "数据"]))
    n_words = draw(st.one_of(st.integers(40, 400), st.integers(3500, 4500)))
    return f.long_text(n_words, word)


tool_outputs = st.one_of(short_text, long_outputs())
part_outputs = st.lists(st.builds(f.text_part, tool_outputs), min_size=1, max_size=3)


@st.composite
def user_messages(draw: Draw) -> Msg:
    parts = st.lists(
        st.one_of(st.builds(f.text_part, short_text), st.builds(f.image_part)),
        min_size=1,
        max_size=3,
    )
    content = draw(st.one_of(short_text, parts))
    name = draw(st.one_of(st.none(), st.sampled_from(["alice", "bob"])))
    return f.user(content, name=name)


@st.composite
def tool_blocks(draw: Draw, ids: Callable[[], str]) -> list[Msg]:
    """An assistant turn with 1-3 parallel calls and all their results, in any order."""
    names = draw(st.lists(st.sampled_from(TOOL_NAMES), min_size=1, max_size=3))
    calls = [f.call(ids(), name) for name in names]
    head = f.assistant_calls(*calls, content=draw(st.one_of(st.none(), short_text)))
    results = [f.tool_result(c["id"], draw(st.one_of(tool_outputs, part_outputs))) for c in calls]
    return [head, *draw(st.permutations(results))]


@st.composite
def function_blocks(draw: Draw) -> list[Msg]:
    name = draw(st.sampled_from(TOOL_NAMES))
    content = draw(st.one_of(st.none(), short_text))
    return [f.function_call(name, content=content), f.function_result(name, draw(tool_outputs))]


@st.composite
def steps(draw: Draw, ids: Callable[[], str]) -> list[Msg]:
    """What follows a user message within a turn: one reply, tool block or aside."""
    kind = draw(st.sampled_from(["text", "tools", "tools", "function", "system"]))
    if kind == "text":
        return [f.assistant(draw(short_text))]
    if kind == "tools":
        return list(draw(tool_blocks(ids)))
    if kind == "function":
        return list(draw(function_blocks()))
    aside = st.one_of(st.builds(f.system, st.just("Be brief now.")), st.builds(f.developer))
    return [draw(aside)]


@st.composite
def conversations(draw: Draw, max_turns: int = 6) -> list[Msg]:
    """A valid conversation; it may end on a user message or mid agent loop."""
    counter = itertools.count()

    def ids() -> str:
        return f"call_{next(counter)}"

    prefix = draw(st.lists(st.one_of(st.builds(f.system), st.builds(f.developer)), max_size=2))
    messages: list[Msg] = list(prefix)
    for _ in range(draw(st.integers(1, max_turns))):
        messages.append(draw(user_messages()))
        for _ in range(draw(st.integers(0, 3))):
            messages.extend(draw(steps(ids)))
    return messages


def _damage(draw: Draw, messages: list[Msg]) -> None:
    """Apply one kind of damage a buggy client or a careless curator could do."""
    kind = draw(
        st.sampled_from(
            ["delete", "duplicate", "move", "orphan", "empty_calls", "silent", "stray_function"]
        )
    )
    spot = draw(st.integers(0, len(messages)))
    if kind == "delete" and messages:
        del messages[min(spot, len(messages) - 1)]
    elif kind == "duplicate" and messages:
        messages.insert(spot, dict(messages[min(spot, len(messages) - 1)]))
    elif kind == "move" and messages:
        messages.insert(spot, messages.pop(draw(st.integers(0, len(messages) - 1))))
    elif kind == "orphan":
        messages.insert(spot, f.tool_result(draw(st.sampled_from(["call_0", "ghost"]))))
    elif kind == "empty_calls":
        messages.insert(spot, f.assistant_calls(content=draw(st.one_of(st.none(), short_text))))
    elif kind == "silent":
        messages.insert(spot, f.assistant(None))
    elif kind == "stray_function":
        messages.insert(spot, f.function_result())


@st.composite
def damaged_conversations(draw: Draw) -> list[Msg]:
    messages = list(draw(conversations()))
    for _ in range(draw(st.integers(1, 4))):
        _damage(draw, messages)
    return messages


def soup_messages(ids: tuple[str, ...] = ("a", "b", "c")) -> st.SearchStrategy[Msg]:
    """Any single message, with call ids from a tiny pool so they collide."""
    call_ids = st.lists(st.sampled_from(ids), max_size=3)
    return st.one_of(
        user_messages(),
        st.builds(f.assistant, st.one_of(st.none(), short_text)),
        st.builds(lambda cs: f.assistant_calls(*cs), call_ids),
        st.builds(f.tool_result, st.sampled_from(ids), tool_outputs),
        st.builds(f.function_call, st.sampled_from(TOOL_NAMES)),
        st.builds(f.function_result, st.sampled_from(TOOL_NAMES)),
        st.builds(f.system),
        st.builds(f.developer),
    )


broken_conversations = st.one_of(
    damaged_conversations(), st.lists(soup_messages(), min_size=1, max_size=12)
)
"""Conversations in any order at all: what coherence repair must always make valid."""


OUTPUT_POOL = tuple(f.long_text(n, w) for n, w in ((60, "line"), (300, "lorem"), (900, "données")))
"""Tool outputs an agent session draws again and again, as agents re-read the same files."""


@st.composite
def agent_sessions(draw: Draw, max_steps: int = 10) -> list[Msg]:
    """A coding-agent session: a task, then tool steps whose outputs often repeat, and now
    and then a report and a follow-up from the user."""
    counter = itertools.count()
    messages: list[Msg] = [f.system(), f.user("Fix the failing test.")]
    for _ in range(draw(st.integers(1, max_steps))):
        if draw(st.integers(0, 4)) == 0:
            messages += [f.assistant(draw(short_text)), draw(user_messages())]
            continue
        names = draw(st.lists(st.sampled_from(TOOL_NAMES), min_size=1, max_size=3))
        calls = [f.call(f"call_{next(counter)}", name) for name in names]
        messages.append(f.assistant_calls(*calls, content=draw(st.one_of(st.none(), short_text))))
        for c in calls:
            output = draw(st.one_of(st.sampled_from(OUTPUT_POOL), tool_outputs))
            messages.append(f.tool_result(c["id"], output))
    return messages


@st.composite
def growing(draw: Draw, base: st.SearchStrategy[list[Msg]]) -> tuple[list[Msg], list[Msg]]:
    """(earlier, later): a valid conversation, and the same one a few turns later.

    The earlier list ends at a unit boundary of the later one, so both are valid, as an
    agent's successive requests are.
    """
    messages = list(draw(base))
    starts = [u.start for u in units(messages)][1:]
    if not starts:
        messages.append(f.user("Go on."))
        starts = [len(messages) - 1]
    # Mostly late splits: an early state has too little history for curators to act on.
    split = draw(st.sampled_from(starts[len(starts) // 2 :]))
    return messages[:split], messages


@st.composite
def repeated_id_conversations(draw: Draw, max_turns: int = 6) -> list[Msg]:
    """A valid conversation whose calls share ids: with period k, calls k at a time get the
    same id, so a block may hold two or three calls `call_n` answered by as many results
    (OpenAI accepts that, pairing them by position)."""
    counter = itertools.count()
    period = draw(st.integers(2, 3))

    def ids() -> str:
        return f"call_{next(counter) // period}"

    prefix = draw(st.lists(st.one_of(st.builds(f.system), st.builds(f.developer)), max_size=2))
    messages: list[Msg] = list(prefix)
    for _ in range(draw(st.integers(1, max_turns))):
        messages.append(draw(user_messages()))
        for _ in range(draw(st.integers(0, 3))):
            messages.extend(draw(steps(ids)))
    return messages


def null_field_messages() -> st.SearchStrategy[Msg]:
    """Single messages whose fields are null or missing: what a sloppy client sends, and
    what curation may drop entirely (a lone `function` result with null content)."""
    nullable = st.one_of(st.none(), short_text)
    return st.one_of(
        st.builds(lambda c, n: {"role": "function", "content": c, "name": n}, nullable, nullable),
        st.builds(lambda c: {"role": "tool", "content": c, "tool_call_id": None}, nullable),
        st.builds(lambda c: {"role": "assistant", "content": c}, nullable),
        st.builds(lambda c: {"role": "assistant", "content": c, "tool_calls": []}, nullable),
        st.builds(lambda c: {"role": "user", "content": c}, nullable),
    )


any_message_lists = st.one_of(
    broken_conversations.filter(bool),
    repeated_id_conversations(),
    st.lists(st.one_of(soup_messages(), null_field_messages()), min_size=1, max_size=8),
)
"""Any non-empty list of messages with a string role: what the proxy may be sent."""
