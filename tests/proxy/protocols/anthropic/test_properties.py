"""Hypothesis: curating random Messages histories (thinking, tool loops, images, results
with text after them, breakpoints) through the shipped presets at small windows never
gives a body the strict fake refuses; curating the result again changes nothing; the
client's breakpoints are never more than 4 and each is on its own block or moved back."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies.loader import load_preset
from policies.policy import Policy
from policies.tokens import TokenCounter
from proxy.config.limits import Limits
from proxy.protocols.anthropic.protocol import ANTHROPIC
from tests.fakes import anthropic_rules as rules

COUNTER = TokenCounter()
LIMITS = Limits()
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP4z8DwHwAFAAH/"
    "iZk9HQAAAABJRU5ErkJggg=="
)
WORDS = st.sampled_from(["alpha", "beta", "gamma", "delta", "file.py", "def f():", "x = 1"])


def text(min_words: int = 1, max_words: int = 60) -> st.SearchStrategy[str]:
    return st.lists(WORDS, min_size=min_words, max_size=max_words).map(" ".join)


def text_block() -> st.SearchStrategy[dict[str, Any]]:
    return text().map(lambda t: {"type": "text", "text": t})


IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
DOCUMENT = {
    "type": "document",
    "source": {"type": "text", "media_type": "text/plain", "data": "doc"},
}


@st.composite
def histories(draw: st.DrawFn) -> dict[str, Any]:
    thinking = draw(st.booleans())
    messages: list[dict[str, Any]] = [{"role": "user", "content": draw(text(1, 30))}]
    ids = iter(range(10_000))
    for _ in range(draw(st.integers(1, 8))):
        blocks: list[dict[str, Any]] = []
        if thinking:
            t = draw(text(1, 20))
            blocks.append({"type": "thinking", "thinking": t, "signature": rules.sign(t)})
        if draw(st.booleans()):
            blocks.append(draw(text_block()))
        uses = [f"toolu_{next(ids)}" for _ in range(draw(st.integers(0, 2)))]
        if not uses and not any(b["type"] == "text" for b in blocks):
            blocks.append(draw(text_block()))
        blocks += [{"type": "tool_use", "id": u, "name": "read", "input": {"p": u}} for u in uses]
        messages.append({"role": "assistant", "content": blocks})
        user: list[dict[str, Any]] = []
        for u in uses:
            content: Any = draw(
                st.one_of(
                    text(1, 250),
                    st.lists(st.one_of(text_block(), st.just(IMAGE)), min_size=1, max_size=3),
                )
            )
            user.append(
                {
                    "type": "tool_result",
                    "tool_use_id": u,
                    "content": content,
                    **({"is_error": True} if draw(st.booleans()) else {}),
                }
            )
        rest = draw(
            st.lists(st.one_of(text_block(), st.just(IMAGE), st.just(DOCUMENT)), max_size=2)
        )
        if not user and not rest:
            rest = [draw(text_block())]
        messages.append({"role": "user", "content": user + rest})
    if not thinking and draw(st.booleans()):
        messages.append({"role": "assistant", "content": "Sure"})
        messages.append({"role": "user", "content": "go on"})
    _mark(draw, messages)
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": messages}
    body["system"] = [
        {"type": "text", "text": "Be careful.", "cache_control": {"type": "ephemeral"}}
    ]
    if thinking:
        body["thinking"] = {"type": "enabled", "budget_tokens": 512}
    return body


def _mark(draw: st.DrawFn, messages: list[dict[str, Any]]) -> None:
    """Up to 3 breakpoints (the system holds the 4th) on blocks that can carry one."""
    spots = [
        (i, j)
        for i, m in enumerate(messages)
        if isinstance(m["content"], list)
        for j, b in enumerate(m["content"])
        if b["type"] not in ("thinking", "redacted_thinking")
    ]
    for i, j in draw(st.lists(st.sampled_from(spots), max_size=3, unique=True)) if spots else []:
        block = messages[i]["content"][j]
        messages[i]["content"][j] = {**block, "cache_control": {"type": "ephemeral"}}


POLICIES = [
    dataclasses.replace(load_preset(name), context_window=window)
    for name in ("default", "coding-agent")
    for window in (1500, 3000)
]


def curate(policy: Policy, raw: bytes) -> bytes:
    wire = ANTHROPIC.parse(raw, LIMITS)
    assert wire.skip is None, wire.skip
    result = policy.curate(wire.messages, wire.facts, COUNTER)
    return ANTHROPIC.rebuild(wire, result.messages) if result.changed else raw


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(body=histories(), which=st.integers(0, len(POLICIES) - 1))
def test_curated_histories_are_accepted_idempotent_and_keep_breakpoints(
    body: dict[str, Any], which: int
) -> None:
    rules.check(body)  # the generator makes only valid histories
    raw = orjson.dumps(body)
    curated = curate(POLICIES[which], raw)
    sent = orjson.loads(curated)
    rules.check(sent)
    assert curate(POLICIES[which], curated) == curated
    assert {k: v for k, v in sent.items() if k != "messages"} == {
        k: v for k, v in body.items() if k != "messages"
    }
    _breakpoints_kept_or_moved_back(body, sent)


def _breakpoints_kept_or_moved_back(before: dict[str, Any], after: dict[str, Any]) -> None:
    def marked(body: dict[str, Any]) -> list[str]:
        return [
            orjson.dumps({k: v for k, v in b.items() if k != "cache_control"}).decode()
            for b in rules.all_blocks(body)
            if "cache_control" in b
        ]

    old, new = marked(before), marked(after)
    assert len(new) <= min(4, len(old))
    kept = [
        orjson.dumps({k: v for k, v in b.items() if k != "cache_control"}).decode()
        for b in rules.all_blocks(after)
    ]
    every = [
        orjson.dumps({k: v for k, v in b.items() if k != "cache_control"}).decode()
        for b in rules.all_blocks(before)
    ]
    for block in old:
        # A block still sent keeps its breakpoint (told apart by content: only blocks whose
        # content is unique, or an identical block elsewhere would pass for the dropped one).
        if every.count(block) == 1 and block in kept:
            assert block in new
