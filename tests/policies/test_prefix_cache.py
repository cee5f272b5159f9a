"""The prefix-cache pricing model, on hand-built sequences with exact numbers."""

from __future__ import annotations

import pytest

from policies.errors import ParamError
from policies.prefix_cache import Block, PrefixCache, Prompt, prompt_of
from policies.tokens import REPLY_PRIMING, TokenCounter
from tests.factories import assistant, system, tool_result, user

TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]


def prompt(*blocks: tuple[str, int]) -> Prompt:
    return Prompt(tuple(Block(key.encode(), tokens) for key, tokens in blocks))


@pytest.mark.parametrize(
    ("shared", "cached"),
    [(0, 0), (1023, 0), (1024, 1024), (1151, 1024), (1152, 1152), (5000, 4992)],
)
def test_cacheable_needs_1024_tokens_then_counts_in_128_token_steps(
    shared: int, cached: int
) -> None:
    assert PrefixCache().cacheable(shared) == cached


def test_first_request_pays_full_price_and_a_grown_one_pays_little() -> None:
    first = prompt(("sys", 600), ("task", 600), ("end", 3))
    grown = prompt(("sys", 600), ("task", 600), ("step", 300), ("end", 3))
    costs = PrefixCache().price([first, grown])
    a, b = costs.requests
    assert (a.input_tokens, a.cached_tokens, a.cost) == (1203, 0, 1203)
    # 1200 shared tokens round down to 1152; 51 uncached + 1152 * 0.1.
    assert (b.input_tokens, b.cached_tokens) == (1503, 1152)
    assert b.cost == pytest.approx(1503 - 1152 + 115.2)
    assert costs.input_tokens == 2706
    assert costs.cached_tokens == 1152
    assert costs.cost == pytest.approx(1203 + 466.2)
    assert costs.hit_ratio == pytest.approx(1152 / 2706)


def test_the_longest_prefix_shared_with_any_earlier_request_counts() -> None:
    r1 = prompt(("sys", 500), ("x", 2000), ("end", 3))
    r2 = prompt(("sys", 500), ("y", 1000), ("end", 3))
    r3 = prompt(("sys", 500), ("x", 2000), ("z", 100), ("end", 3))
    r4 = prompt(("sys", 500), ("y", 1000), ("w", 100), ("end", 3))
    cached = [r.cached_tokens for r in PrefixCache().price([r1, r2, r3, r4]).requests]
    # r2 shares only 500 tokens with r1; r3 shares 2500 with r1; r4 shares 1500 with r2.
    assert cached == [0, 0, 2432, 1408]


def test_a_changed_block_ends_the_shared_prefix_even_if_later_blocks_match() -> None:
    r1 = prompt(("sys", 200), ("a", 3000), ("b", 3000), ("end", 3))
    r2 = prompt(("sys", 200), ("a-cut", 1000), ("b", 3000), ("end", 3))
    r3 = prompt(("sys", 200), ("a", 3000), ("c", 10), ("end", 3))
    cached = [r.cached_tokens for r in PrefixCache().price([r1, r2, r3]).requests]
    assert cached == [0, 0, 3200]


def test_an_identical_request_is_cached_whole_and_a_shorter_one_up_to_where_it_ends() -> None:
    long = prompt(("sys", 1500), ("a", 500), ("end", 3))
    short = prompt(("sys", 1500), ("end", 3))
    cached = [r.cached_tokens for r in PrefixCache().price([long, long, short]).requests]
    # 2003 -> 1920; the short one's priming differs from the long one's next message.
    assert cached == [0, 1920, 1408]


def test_cached_price_and_granularity_are_parameters() -> None:
    r1 = prompt(("sys", 2000), ("end", 3))
    r2 = prompt(("sys", 2000), ("more", 100), ("end", 3))
    half = PrefixCache(cached_price=0.5).price([r1, r2]).requests[1]
    assert half.cached_tokens == 1920
    assert half.cost == pytest.approx(2103 - 1920 + 960)
    exact = PrefixCache(cached_price=0, min_tokens=1, increment=1).price([r1, r2]).requests[1]
    assert (exact.cached_tokens, exact.cost) == (2000, 103)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"cached_price": 1.5}, "cached_price"),
        ({"cached_price": -0.1}, "cached_price"),
        ({"min_tokens": 0}, "min_tokens"),
        ({"increment": 0}, "increment"),
    ],
)
def test_invalid_parameters_name_the_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ParamError) as info:
        PrefixCache(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_prompt_of_counts_the_request_prompt_tokens(counter: TokenCounter) -> None:
    messages = [system(), user("Find the bug in billing.py " * 20), assistant("On it.")]
    built = prompt_of(messages, counter, "gpt-4o", TOOLS)
    expected = counter.count_tools(TOOLS, "gpt-4o") + counter.count_messages(messages, "gpt-4o")
    assert built.tokens == expected
    assert len(built.blocks) == 1 + len(messages) + 1
    assert built.blocks[-1].tokens == REPLY_PRIMING
    assert prompt_of(messages, counter, "gpt-4o").tokens == expected - built.blocks[0].tokens


def test_equal_messages_match_whatever_their_key_order_and_identity(
    counter: TokenCounter,
) -> None:
    history = [system("Be brief. " * 400), user("Read it."), tool_result("c1", "x " * 900)]
    reordered = [{k: m[k] for k in reversed(list(m))} for m in history]
    r1 = prompt_of(history, counter, "gpt-4o", TOOLS)
    r2 = prompt_of([*reordered, user("Next?")], counter, "gpt-4o", TOOLS)
    shared = r1.tokens - REPLY_PRIMING
    assert PrefixCache().price([r1, r2]).requests[1].cached_tokens == PrefixCache().cacheable(
        shared
    )
    assert shared > 1024


def test_different_tools_share_no_prefix(counter: TokenCounter) -> None:
    history = [system("Be brief. " * 600), user("Go.")]
    other = [{**TOOLS[0], "function": {"name": "grep", "parameters": {"type": "object"}}}]
    r1 = prompt_of(history, counter, "gpt-4o", TOOLS)
    r2 = prompt_of(history, counter, "gpt-4o", other)
    assert [r.cached_tokens for r in PrefixCache().price([r1, r2]).requests] == [0, 0]
