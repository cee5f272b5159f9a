"""Properties of role_truncation, history_retention, tool_use_clearing, dedupe and the tuned
presets, on random conversations.

Besides the contract (checked for every registered curator in test_properties.py), each
curator has a prefix-stability property: for a conversation
`short` and the same conversation a few turns later, `long`, the curated forms of
`short`'s early messages are identical, except where the curator's documented large-step
move happened. Providers cache prompt prefixes, so this is what keeps curation cheap.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import invariants
from policies.base import Action, CurationContext, PinSpec
from policies.chain import CurationResult
from policies.dedupe import Dedupe
from policies.history_retention import HistoryRetention
from policies.loader import load_preset
from policies.messages import Message, is_result, turn_starts, units
from policies.role_truncation import RoleTruncation
from policies.tool_use_clearing import ToolUseClearing
from tests import factories as f
from tests.strategies import agent_sessions, conversations, growing

Msgs = list[dict[str, Any]]

PRESETS = ("coding-agent", "chat")

any_conversation = st.one_of(conversations(), agent_sessions())
pin_specs = st.sampled_from([PinSpec(), PinSpec(first_user=True)])
budget_fractions = st.floats(0.05, 1.2)


def context(messages: Msgs, fraction: float, pins: PinSpec) -> CurationContext:
    return f.ctx(budget=max(1, int(fraction * f.tokens(messages))), pins=pins)


# -- the contract ----------------------------------------------------------------------


@pytest.mark.parametrize("preset", PRESETS)
@settings(max_examples=30)
@given(any_conversation, budget_fractions)
def test_tuned_presets_keep_the_contract(preset: str, messages: Msgs, fraction: float) -> None:
    policy = load_preset(preset)
    ctx = context(messages, fraction, policy.pins)
    before = copy.deepcopy(messages)
    result = policy.chain.run(messages, ctx, check=True)
    assert messages == before
    feasible = f.floor_tokens(messages, ctx) <= ctx.budget
    budget = ctx.budget if feasible else None
    assert invariants.check(messages, result.messages, ctx, budget=budget) == []
    assert result.tokens_after == f.tokens(result.messages)
    assert policy.chain.run(result.messages, ctx).messages == result.messages


# -- prefix stability ------------------------------------------------------------------


def old_before(messages: Msgs, keep_recent_turns: int) -> int:
    """Messages before this index are older than the newest `keep_recent_turns` turns."""
    if keep_recent_turns == 0:
        return units(messages)[-1].start
    starts = turn_starts(messages)
    return starts[-keep_recent_turns] if len(starts) > keep_recent_turns else 0


def derived(n_input: int, out: list[Message], actions: tuple[Action, ...]) -> dict[int, Message]:
    """Input index -> its curated form, for a curator that drops (reporting "drop") or
    rewrites messages in place."""
    dropped = {i for a in actions if a.kind == "drop" for i in a.indexes}
    kept = [i for i in range(n_input) if i not in dropped]
    assert len(kept) == len(out)
    return dict(zip(kept, out, strict=True))


def early(forms: dict[int, Message], end: int) -> dict[int, Message]:
    return {i: m for i, m in forms.items() if i < end}


@pytest.mark.parametrize("keep_recent_turns", [0, 1, 2])
@settings(max_examples=25)
@given(growing(any_conversation), pin_specs)
def test_role_truncation_rewrites_an_old_message_the_same_way_every_turn(
    keep_recent_turns: int, pair: tuple[Msgs, Msgs], pins: PinSpec
) -> None:
    """Without a cap, every message older than `short`'s recent turns comes out the same."""
    short, long = pair
    curator = RoleTruncation(
        roles={"user": {"max_chars": 20}, "assistant": {"max_chars": 5}, "tool": {"max_chars": 50}},
        keep_recent_turns=keep_recent_turns,
        max_messages=None,
    )
    ctx = f.ctx(pins=pins)
    end = old_before(short, keep_recent_turns)
    out_short, out_long = curator.curate(short, ctx), curator.curate(long, ctx)
    assert out_long.messages[:end] == out_short.messages[:end]


@settings(max_examples=40)
@given(any_conversation, pin_specs, st.integers(1, 8))
def test_role_truncation_cap_keeps_the_newest_user_message(
    messages: Msgs, pins: PinSpec, cap: int
) -> None:
    newest = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
    curator = RoleTruncation(max_messages=cap, low_water=0.5)
    out = curator.curate(messages, f.ctx(pins=pins))
    dropped = {i for a in out.actions if a.kind == "drop" for i in a.indexes}
    assert newest is None or newest not in dropped
    again = curator.curate(out.messages, f.ctx(pins=pins))
    assert (again.messages, again.actions) == (out.messages, ())


@settings(max_examples=40)
@given(growing(any_conversation), pin_specs)
def test_role_truncation_cap_moves_only_in_steps(pair: tuple[Msgs, Msgs], pins: PinSpec) -> None:
    """The cap's cut only moves forward, and while it stays put, `short`'s old messages
    come out the same."""
    short, long = pair
    curator = RoleTruncation(roles={"tool": {"max_chars": 30}}, max_messages=6, low_water=0.5)
    ctx = f.ctx(pins=pins)
    out_short, out_long = curator.curate(short, ctx), curator.curate(long, ctx)
    drops_short = {i for a in out_short.actions if a.kind == "drop" for i in a.indexes}
    drops_long = {i for a in out_long.actions if a.kind == "drop" for i in a.indexes}
    assert drops_short <= drops_long
    if drops_short == drops_long:
        end = old_before(short, 2)
        forms_short = derived(len(short), out_short.messages, out_short.actions)
        forms_long = derived(len(long), out_long.messages, out_long.actions)
        assert early(forms_long, end) == early(forms_short, end)


@pytest.mark.parametrize("keep_recent_turns", [0, 1, 2])
@pytest.mark.parametrize("mode", ["summary", "drop"])
@settings(max_examples=20)
@given(growing(any_conversation), pin_specs)
def test_history_retention_rewrites_an_old_message_the_same_way_every_turn(
    keep_recent_turns: int, mode: Any, pair: tuple[Msgs, Msgs], pins: PinSpec
) -> None:
    short, long = pair
    curator = HistoryRetention(
        threshold_chars=256, keep_recent_turns=keep_recent_turns, user=mode, tool=mode
    )
    ctx = f.ctx(pins=pins)
    out_short, out_long = curator.curate(short, ctx), curator.curate(long, ctx)
    end = old_before(short, keep_recent_turns)
    forms_short = derived(len(short), out_short.messages, out_short.actions)
    forms_long = derived(len(long), out_long.messages, out_long.actions)
    assert early(forms_long, end) == early(forms_short, end)


@pytest.mark.parametrize("clear_at_least", [0, 700, 3000])
@settings(max_examples=20)
@given(growing(agent_sessions()), pin_specs, st.integers(0, 3), st.booleans())
def test_tool_use_clearing_region_only_grows_a_whole_chunk_at_a_time(
    clear_at_least: int, pair: tuple[Msgs, Msgs], pins: PinSpec, keep: int, arguments: bool
) -> None:
    """Up to the end of `short`'s cleared region, `long` comes out the same; what `long`
    clears beyond it saves at least `clear_at_least` tokens."""
    short, long = pair
    curator = ToolUseClearing(
        trigger_tokens=1000, keep=keep, clear_at_least=clear_at_least, clear_arguments=arguments
    )
    ctx = f.ctx(pins=pins)
    out_short, out_long = curator.curate(short, ctx), curator.curate(long, ctx)
    end = max((max(a.indexes) + 1 for a in out_short.actions), default=0)
    assert out_long.messages[:end] == out_short.messages[:end]
    # Reasons name the conversation's size, so compare what was done, not why.
    done_long = {(a.indexes, a.tokens_removed) for a in out_long.actions}
    assert {(a.indexes, a.tokens_removed) for a in out_short.actions} <= done_long
    extra = [a for a in out_long.actions if min(a.indexes) >= end]
    if extra:
        assert sum(a.tokens_removed for a in extra) >= max(1, clear_at_least)


@settings(max_examples=40)
@given(growing(agent_sessions()), pin_specs)
def test_dedupe_rewrites_an_old_copy_once_when_its_first_repeat_arrives(
    pair: tuple[Msgs, Msgs], pins: PinSpec
) -> None:
    short, long = pair
    ctx = f.ctx(pins=pins)
    out_short = Dedupe(min_tokens=1).curate(short, ctx).messages
    out_long = Dedupe(min_tokens=1).curate(long, ctx).messages
    later = [m.get("content") for m in long[len(short) :] if is_result(m)]
    for i, (before, after) in enumerate(zip(out_short, out_long, strict=False)):
        if before != after:
            # Only the newest copy in `short` may change, and only because it repeats.
            assert before == short[i]
            assert short[i].get("content") in later


@pytest.mark.parametrize("preset", PRESETS)
@settings(max_examples=25)
@given(growing(any_conversation), st.floats(0.3, 1.5))
def test_tuned_presets_keep_the_early_prefix_unless_a_curator_moved(
    preset: str, pair: tuple[Msgs, Msgs], fraction: float
) -> None:
    """If no curator changed what it did to `short`'s early messages (a cut moving, a
    clearing chunk, a turn ageing, a repeat arriving), the curated `short` without its last
    unit is a prefix of the curated `long`, byte for byte."""
    short, long = pair
    policy = load_preset(preset)
    ctx = context(long, fraction, policy.pins)
    result_short, result_long = policy.chain.run(short, ctx), policy.chain.run(long, ctx)
    if any(a.reason.startswith("overflow") for a in result_long.actions):
        return  # cutting contents to fit an impossible budget is an emergency, not stable
    last = units(short)[-1]
    if _early_actions(result_short, last.start) == _early_actions(result_long, last.start):
        k = len(result_short.messages) - (last.stop - last.start)
        assert result_long.messages[:k] == result_short.messages[:k]


def _early_actions(result: CurationResult, end: int) -> set[tuple[str, str, tuple[int, ...], int]]:
    # Tokens removed too: token_budget may cut one of the newest contents to a different
    # rung as the room shrinks, the same message with a different cut.
    return {
        (a.curator, a.kind, a.indexes, a.tokens_removed)
        for a in result.actions
        if a.indexes and min(a.indexes) < end
    }
