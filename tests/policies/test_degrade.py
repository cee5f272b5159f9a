"""Graceful degradation: on a small window, fresh tool results are shortened, not dropped.

The starvation case of issue 15: on an 8k window (about 4k for messages), a LangChain run
whose two newest tool results were about 2k tokens each was curated to 39 tokens, as
every recent result was dropped whole.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from policies import invariants
from policies.budget import TokenBudget
from policies.degrade import MIN_CAP, boundary, floor_cap, marker, rung_at_most
from policies.loader import load_preset
from policies.messages import Unit
from policies.tokens import REPLY_PRIMING
from tests import factories as f

Msgs = list[dict[str, Any]]
PRESETS = ("default", "chat", "coding-agent")
WINDOW, REPLY = 8192, 4096
BUDGET = WINDOW - REPLY - REPLY_PRIMING


def langchain_run(steps: int = 25) -> Msgs:
    """A system prompt, a task, small file reads, and two ~2k-token reads as the newest."""
    messages: Msgs = [f.system("You are a coding agent."), f.user("Fix the failing test in m.")]
    for n in range(1, steps + 1):
        big = n > steps - 2
        output = f.long_text(500, f"m{n}x") if big else f"contents of m{n}: ok"
        messages += [
            f.assistant_calls(f.call(f"call_{n}", "read", {"path": f"m{n}"}), content=f"Read m{n}"),
            f.tool_result(f"call_{n}", output),
        ]
    return messages


def test_the_recent_reads_are_about_2k_tokens_each() -> None:
    messages = langchain_run()
    assert 1900 <= f.tokens([messages[-1]]) <= 2600
    assert f.tokens(messages) > BUDGET


@pytest.mark.parametrize("preset", PRESETS)
def test_starvation_case_keeps_the_recent_results_shortened_and_fills_the_budget(
    preset: str,
) -> None:
    policy = load_preset(preset)
    messages = langchain_run()
    ctx = f.ctx(budget=BUDGET, pins=policy.pins)
    result = policy.chain.run(messages, ctx, check=True)
    used = f.tokens(result.messages)
    assert BUDGET * 0.85 <= used <= BUDGET
    assert result.messages[1] == messages[1]  # the task: the newest user message
    kept = {m.get("tool_call_id"): m["content"] for m in result.messages if m["role"] == "tool"}
    newest, second = messages[-1], messages[-3]
    assert kept[newest["tool_call_id"]] == newest["content"]
    content = kept[second["tool_call_id"]]
    head, _, rest = content.partition("\n\n[... ")
    middle, _, tail = rest.partition(" ...]\n\n")
    assert middle.endswith("tokens removed by context-curator to fit the context window")
    assert head
    assert tail
    assert second["content"].startswith(head)
    assert second["content"].endswith(tail)


def test_the_newest_content_is_cut_least() -> None:
    messages = langchain_run()
    out = TokenBudget().curate(messages, f.ctx(budget=BUDGET)).messages
    newest, second = f.tokens([out[-1]]), f.tokens([out[-3]])
    assert newest >= second
    assert f.tokens(out) >= BUDGET * 0.85


def test_degraded_output_is_curated_again_unchanged() -> None:
    messages = langchain_run()
    curator, ctx = TokenBudget(low_water=0.9), f.ctx(budget=BUDGET)
    out = curator.curate(messages, ctx)
    assert [a.kind for a in out.actions] == ["truncate"]
    again = curator.curate(out.messages, f.ctx(budget=BUDGET))
    assert again.messages == out.messages
    assert again.actions == ()


def test_old_long_results_are_cut_the_same_way_as_the_run_grows() -> None:
    """Prefix cache: a result cut to the floor stays byte-identical on later turns, while
    the newest result, which the model has not seen yet, is always whole."""
    curator = TokenBudget(low_water=0.6)
    messages: Msgs = [f.system(), f.user("Go.")]
    previous: Msgs = []
    same = 0
    for n in range(30):
        messages += f.tool_use(f"c{n}", f.long_text(100 + 5 * n, f"r{n}x"))
        out = curator.curate(messages, f.ctx(budget=6000)).messages
        assert f.tokens(out) <= 6000
        assert out[-2:] == messages[-2:]
        # All but the previous newest unit, which is cut once it is no longer the newest.
        if previous and out[: len(previous) - 2] == previous[: len(previous) - 2]:
            same += 1
        if f.tokens(messages) > 6000:
            assert f.tokens(out) >= 6000 * 0.85
        previous = out
    assert same >= 10


def test_the_ladder_is_fixed_and_fine() -> None:
    floor = floor_cap(4000)
    assert floor == 500
    assert floor_cap(100) == 64
    assert rung_at_most(499, floor) == floor
    rungs = sorted({rung_at_most(t, floor) for t in range(floor, 4001)})
    assert all(b <= a * 1.125 + 1 for a, b in itertools.pairwise(rungs))
    assert rung_at_most(4000, floor) > 3500


def test_marker_names_what_was_removed() -> None:
    assert (
        marker(1234)
        == "[... 1,234 tokens removed by context-curator to fit the context window ...]"
    )


def parallel_reads(words: int) -> Msgs:
    """A task, one block of five parallel reads each below a 3,500-token budget's floor,
    then a few long turns."""
    ids = [f"read_{k}" for k in range(5)]
    return [
        f.system(),
        f.user("Fix the bug."),
        f.assistant_calls(*ids),
        *(f.tool_result(i, f.long_text(words, f"r{k}")) for k, i in enumerate(ids)),
        f.assistant("Read them. " + f.long_text(200, "a")),
        f.user("Which one? " + f.long_text(200, "b")),
        f.assistant("m2. " + f.long_text(200, "c")),
        f.user("Now fix m2. " + f.long_text(200, "q")),
    ]


@pytest.mark.parametrize("words", [155, 160, 170])
def test_a_unit_dropped_whole_would_starve_a_4k_window_so_it_is_cut_instead(words: int) -> None:
    """A 4k window (3,500 tokens of budget) was curated to 47% of it: the block of five
    reads, each below the floor, went whole for being a few hundred tokens over."""
    messages = parallel_reads(words)
    ctx = f.ctx(budget=3500)
    assert all(f.tokens([m]) < floor_cap(3500) for m in messages[3:7])
    out = TokenBudget(low_water=0.7).curate(messages, ctx)
    assert 0.85 * 3500 <= f.tokens(out.messages) <= 3500
    results = [m for m in out.messages if m.get("role") == "tool"]
    assert [m["tool_call_id"] for m in results] == [f"read_{k}" for k in range(5)]
    assert any(marker(0).split("0")[-1] in m["content"] for m in results)  # cut, not dropped
    assert out.messages[-2:] == messages[-2:]
    assert invariants.check(messages, out.messages, ctx, budget=3500) == []
    again = TokenBudget(low_water=0.7).curate(out.messages, ctx)
    assert (again.messages, again.actions) == (out.messages, ())


def test_a_unit_is_kept_cut_only_when_that_saves_enough() -> None:
    messages = parallel_reads(160)
    each = [f.tokens([m]) - REPLY_PRIMING for m in messages]
    block = Unit(2, 8)
    deep, saved = boundary(messages, each, block, each, 1000, f.ctx(budget=3500))
    assert sorted(deep) == [3, 4, 5, 6, 7]  # the five reads; the call has no content
    assert saved >= 1000
    assert all(d.at(MIN_CAP) < each[i] for i, d in deep.items())
    assert boundary(messages, each, block, each, saved + 1, f.ctx(budget=3500)) == ({}, 0)
    assert boundary(messages, each, Unit(1, 2), each, 1, f.ctx(budget=3500)) == ({}, 0)
