"""CurationContext's counting: exact, each message hashed once per request, what a curator
derives from a message remembered with it across requests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from policies.base import CurationContext, PinSpec
from policies.chain import Chain
from policies.formula import Sink
from policies.loader import load_preset
from policies.messages import Message
from policies.tokens import TokenCounter
from policies.tool_results import ToolResultTruncation
from tests import factories as f

MODEL = "gpt-4o"


def context(
    counter: TokenCounter | None = None, profile_chars: int | None = 2_048
) -> CurationContext:
    """A request's context, counting with `counter` (the shared one by default)."""
    return CurationContext(MODEL, counter or f.counter(), 100_000, profile_chars=profile_chars)


class Measuring(TokenCounter):
    """A counter that records every batch of messages it is asked to measure."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []
        self.profiled: list[int] = []

    def measure(
        self, messages: Sequence[Message], model: str, sink: Sink | None = None
    ) -> tuple[list[bytes], list[int]]:
        self.batches.append(len(messages))
        out = super().measure(messages, model, sink)
        if sink is not None:
            self.profiled.append(len(sink.profiles))
        return out


def conversation() -> list[dict[str, Any]]:
    lines = "\n".join(f"{i:5d}\tvalue = compute({i})  # é" for i in range(900))
    return [
        f.system(),
        f.user("Fix the bug.", name="dev"),
        *f.tool_use("c1", lines),
        f.assistant_calls("c2", "c3", content="Two searches."),
        f.tool_result("c2", [f.text_part("found "), f.text_part("it")]),
        f.tool_result("c3", "nothing"),
        f.function_call(),
        f.function_result(),
        f.user([f.text_part(), f.image_part()]),
    ]


def test_counts_are_the_counters_counts() -> None:
    messages = conversation()
    ctx = context()
    assert ctx.count_each(messages) == f.counter().count_each(messages, MODEL)
    assert ctx.count_total(messages) == f.counter().count_messages(messages, MODEL)
    assert [ctx.count(m) for m in messages] == f.counter().count_each(messages, MODEL)


def test_each_message_is_measured_once_per_request() -> None:
    counter = Measuring()
    messages = conversation()
    ctx = context(counter)
    ctx.count_total(messages)
    ctx.count_each(messages[2:])
    ctx.count(messages[3])
    ctx.count_total([*messages[:4], f.user("new")])
    assert counter.batches == [len(messages), 1]


def test_a_new_context_measures_again() -> None:
    counter = Measuring()
    messages = conversation()
    context(counter).count_total(messages)
    context(counter).count_total(messages)
    assert counter.batches == [len(messages), len(messages)]


@pytest.mark.parametrize("index", range(len(conversation())))
def test_bare_is_the_count_without_content(index: int) -> None:
    msg = conversation()[index]
    expected = f.counter().count_message({**msg, "content": ""}, MODEL)
    cold = context(TokenCounter())  # counts it afresh: the sink gives the bare count
    cold.count(msg)
    assert cold.count_bare(msg) == expected
    warm = context()
    f.counter().count_message(msg, MODEL)  # a cache hit: the bare count is computed apart
    assert warm.count_bare(msg) == expected


@pytest.mark.parametrize("index", range(len(conversation())))
def test_a_replaced_content_is_counted_exactly(index: int) -> None:
    msg = conversation()[index]
    ctx = context()
    for content in ("", "short", "\n".join(["a longer replacement line"] * 40)):
        new = ctx.with_content(msg, content)
        assert new == {**msg, "content": content}
        assert ctx.count(new) == f.counter().count_message(new, MODEL)


def test_remembered_plans_outlive_the_request_but_not_the_message() -> None:
    counter = TokenCounter()
    computed: list[int] = []

    def plan() -> tuple[int, ...]:
        computed.append(1)
        return (len(computed),)

    msg = f.tool_result("c1", "output")
    for _ in range(2):
        ctx = context(counter)
        copy = dict(msg)  # each request parses the body afresh
        ctx.count(copy)
        assert ctx.recall(copy, b"|test", plan) == (1,)
    changed = context(counter)
    other = f.tool_result("c1", "other output")
    changed.count(other)
    assert changed.recall(other, b"|test", plan) == (2,)
    assert changed.recall(other, b"|other tag", plan) == (3,)


def test_remembered_texts_are_computed_once_per_message() -> None:
    counter = TokenCounter()
    computed: list[str] = []

    def describe() -> str:
        computed.append("d")
        return f"[description {len(computed)}]"

    texts = []
    for content in ("a long log", "a long log", "another log"):
        ctx = context(counter)
        msg = f.tool_result("c1", content)
        ctx.count(msg)
        texts.append(ctx.recall_text(msg, b"|describe", describe))
    assert texts == ["[description 1]", "[description 1]", "[description 2]"]


def test_a_message_made_from_another_is_remembered_under_a_derived_key() -> None:
    counter = TokenCounter()
    computed: list[str] = []

    def plan(label: str) -> tuple[int, ...]:
        computed.append(label)
        return (len(computed),)

    for _ in range(2):
        ctx = context(counter)
        original = f.tool_result("c1", "output " * 50)
        made = ctx.with_content(original, "short", tag=b"|cut")
        assert ctx.recall(made, b"|next", lambda: plan("made")) == (1,)
    unrelated = context(counter)
    loose = {"role": "tool", "tool_call_id": "c9", "content": "x"}
    made = unrelated.with_content(loose, "y")  # no tag: nothing to file what is computed under
    unrelated.recall(made, b"|next", lambda: plan("loose"))
    unrelated.recall(made, b"|next", lambda: plan("loose"))
    assert computed == ["made", "loose", "loose"]


def test_a_content_array_is_counted_in_full() -> None:
    ctx = context()
    msg = f.tool_result("c1", "output")
    parts = [f.text_part("found "), f.text_part("it")]
    new = ctx.with_content(msg, parts)
    assert new == {**msg, "content": parts}
    assert ctx.count(new) == f.counter().count_message(new, MODEL)


class Direct(TokenCounter):
    """A counter that records how often a message is counted without its cache."""

    def __init__(self) -> None:
        super().__init__()
        self.direct_calls = 0

    def direct(self, msg: Message, model: str) -> int:
        self.direct_calls += 1
        return super().direct(msg, model)


def test_a_resent_messages_bare_count_is_remembered_across_requests() -> None:
    counter = Direct()
    msg = f.tool_result("c1", "output " * 100)
    context(counter).count(msg)  # counted afresh: counting it leaves the bare count
    assert counter.direct_calls == 0
    for _ in range(3):  # the body parsed afresh each request: a cache hit, no bare count
        ctx = context(counter)
        assert ctx.count_bare(dict(msg)) == f.counter().count_message({**msg, "content": ""}, MODEL)
    assert counter.direct_calls == 1


def test_texts_are_counted_with_and_without_profiles() -> None:
    text = "\n".join(f"{i:5d}\trow {i} of the table, é" for i in range(600))
    msg = f.tool_result("c1", text)
    counter = Measuring()
    profiled = context(counter)
    profiled.count(msg)
    assert counter.profiled == [1]
    plain = context(profile_chars=None)
    plain.count(msg)
    n = len(text)
    for ctx in (profiled, plain):
        assert ctx.count_span(text, 10, 5_000) == f.text_tokens(text[10:5_000])
        joined = text[:3_000] + "\n\n[marker]\n\n" + text[n - 2_000 :]
        assert ctx.count_joined(text, 3_000, "\n\n[marker]\n\n", 2_000) == f.text_tokens(joined)
        head = ctx.fit_head(text, 700)
        assert text[:head] == f.counter().head(text, MODEL, 700)
        tail = ctx.fit_tail(text, 900)
        assert text[n - tail :] == f.counter().tail(text, MODEL, 900)
        assert ctx.content_bytes(text) == len(text.encode())


def test_only_texts_the_chain_may_cut_are_profiled() -> None:
    short = "\n".join(f"line {i}" for i in range(400))  # ~3,600 characters
    long = "\n".join(f"line {i}" for i in range(2_000))  # ~16,000 characters
    messages = [f.user("go"), *f.tool_use("c1", short), *f.tool_use("c2", long)]
    for limit, expected in ((100, 2), (10_000, 1), (None, 0)):
        counter = Measuring()
        ctx = CurationContext(MODEL, counter, 100_000, PinSpec())
        curators = () if limit is None else (ToolResultTruncation(max_tokens=limit),)
        Chain(curators).run(messages, ctx)
        assert counter.profiled == [expected]


def test_tool_names_are_read_once_per_message() -> None:
    ctx = context()
    head = f.assistant_calls(f.call("a", "read_file"), f.call("b", "grep"))
    names = ctx.tool_names(head)
    assert names == {"a": "read_file", "b": "grep"}
    assert ctx.tool_names(head) is names


def agent_session() -> list[dict[str, Any]]:
    """Tool outputs big enough to be cut and cleared, some repeated, in one session."""
    messages: list[dict[str, Any]] = [f.system(), f.user("Find the failing test.")]
    for i in range(20):
        rows = 60 + 250 * (i % 4)
        output = "\n".join(f"{j:6d}\tdef case_{i}_{j}(x):  # ünïcode ✓" for j in range(rows))
        if i in (5, 9):
            output = messages[-1]["content"]  # the agent read the same file again
        messages += f.tool_use(f"c{i}", output, name="read_file" if i % 3 else "run_tests")
    return messages


@pytest.mark.parametrize(
    ("preset", "acting"),
    [
        ("coding-agent", {"turn_masking", "token_budget"}),
        ("default", {"turn_masking", "token_budget"}),
    ],
)
def test_a_curated_request_counts_exactly_and_repeats_identically(
    preset: str, acting: set[str]
) -> None:
    policy = load_preset(preset)
    counter = TokenCounter()
    runs = []
    for _ in range(3):  # the first run plans every cut; the others find the plans cached
        messages = [dict(m) for m in agent_session()]
        ctx = CurationContext(MODEL, counter, 9_000, policy.pins)
        runs.append(policy.chain.run(messages, ctx, check=True))
    first = runs[0]
    assert {a.curator for a in first.actions} == acting
    assert first.tokens_after == TokenCounter().count_messages(first.messages, MODEL)
    for again in runs[1:]:
        assert again.messages == first.messages
        assert again.actions == first.actions
        assert again.tokens_after == first.tokens_after
