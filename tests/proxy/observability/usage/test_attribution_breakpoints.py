"""Cache-miss attribution where the client set breakpoints (Anthropic's rules), and across a
change of `prompt_cache_key`."""

from __future__ import annotations

from policies.prefix_cache import Block, PrefixCache, Prompt
from policies.pricing import Price, PriceTable, Usage
from proxy.observability.usage.attribution import Element, Turn, attribute, turn_of
from proxy.observability.usage.breakpoints import marks_of
from proxy.observability.usage.counterfactual import Counterfactuals
from proxy.observability.usage.spend import Sent, account
from tests import factories as f

CACHE = PrefixCache()
PRIMING = Block(b"\0p", 3, width=0)


def prompt(*blocks: tuple[str, int]) -> Prompt:
    """Blocks named by a letter (upper case: a breakpoint ends there), then the priming."""
    made = (Block(n.lower().encode(), t, n.isupper()) for n, t in blocks)
    return Prompt((*made, PRIMING))


def turn(client: Prompt, upstream: Prompt | None = None, partition: str = "") -> Turn:
    return turn_of("m", client, upstream or client, False, partition)


def same(p: Prompt) -> list[int]:
    return list(range(len(p.blocks)))


# Claude Code's breakpoints: the system, and the newest message (it moves every turn).
LAST = prompt(("S", 2000), ("u", 500), ("A", 500))
NOW = prompt(("S", 2000), ("u", 500), ("a", 500), ("T", 800))


def test_an_appended_turn_reads_what_the_last_breakpoint_wrote_to_the_token() -> None:
    found = attribute(turn(LAST), turn(NOW), same(NOW), 3000, CACHE)
    assert (found.cause, found.expected, found.predicted, found.rebilled) == (
        "none",
        3000,
        3000,
        {},
    ), "no 128-token steps: the automatic rule would expect 2944"


def test_a_cut_before_the_moving_breakpoint_loses_back_to_the_system_breakpoint() -> None:
    cut = prompt(("S", 2000), ("x", 40), ("a", 500), ("T", 800))
    found = attribute(turn(LAST), turn(NOW, cut), same(NOW), 2000, CACHE)
    assert (found.cause, found.predicted, found.rebilled) == ("curation", 2000, {"curation": 1000})
    assert found.diverged_at == Element("curated", "message", 1)


def test_an_edit_of_the_newest_message_loses_all_the_moving_breakpoint_held() -> None:
    edited = prompt(("S", 2000), ("u", 500), ("b", 500), ("T", 800))
    found = attribute(turn(LAST), turn(edited), same(edited), 2000, CACHE)
    assert (found.cause, found.rebilled) == ("client", {"client": 1000})
    assert found.diverged_at == Element("original", "message", 2)


def test_a_prefix_past_the_lookback_of_every_breakpoint_is_the_clients() -> None:
    # 25 new blocks and one breakpoint at the end: the last turn's write is out of reach.
    grown = prompt(("S", 2000), ("u", 500), ("a", 500), *((f"n{i}", 40) for i in range(24)))
    grown = Prompt((*grown.blocks[:-2], Block(b"end", 40, True), PRIMING))
    found = attribute(turn(LAST), turn(grown), same(grown), 2000, CACHE)
    assert (found.cause, found.predicted, found.rebilled) == ("client", 2000, {"client": 1000})
    assert found.diverged_at is None, "nothing parted: its breakpoints were too far apart"


def test_a_shortfall_where_both_held_is_expiry() -> None:
    found = attribute(turn(LAST), turn(NOW), same(NOW), 0, CACHE)
    assert (found.cause, found.rebilled) == ("expiry", {"expiry": 3000})


def test_our_counts_are_scaled_by_the_turns_own_ratio() -> None:
    found = attribute(turn(LAST), turn(NOW), same(NOW), 3300, CACHE, scale=1.1)
    assert (found.cause, found.expected, found.rebilled) == ("none", 3300, {})


def test_the_lookback_counts_provider_blocks() -> None:
    blocks = (Block(b"s", 2000, True), *(Block(b"x", 10, width=3) for _ in range(8)))
    marks = marks_of((*blocks, Block(b"e", 10, True)), [2000 + 10 * i for i in range(10)], 1024)
    assert marks.written == (0, 9)
    assert marks.reach == ((0, 0), (2, 9)), "past block 2: 19 provider blocks; past 1: 22"


def test_a_new_prompt_cache_key_is_the_clients() -> None:
    found = attribute(turn(NOW, partition="a"), turn(NOW, partition="b"), same(NOW), 0, CACHE)
    assert (found.cause, found.rebilled) == ("client", {"client": 3800})
    assert found.diverged_at == Element("original", "prompt_cache_key")
    assert found.as_json(None)["diverged_at"] == {
        "prompt": "original",
        "element": "prompt_cache_key",
        "index": None,
    }


def test_the_spend_reads_the_prompt_cache_key_from_the_body() -> None:
    prices = PriceTable.with_overrides([("gpt-4o*", Price(2.5, 1.25, 10.0))])
    history = Counterfactuals()
    messages = [f.system("Be terse. " * 600), f.user("hi")]
    causes = []
    for key in ("a", "a", "b"):
        body = {"model": "gpt-4o", "messages": messages, "prompt_cache_key": key}
        usage = Usage(input=1300, cached=0, output=5)
        sent = Sent.of("gpt-4o", body, messages, [(b"x-session-id", b"s")], usage)
        found = account(sent, f.counter(), prices, history).counterfactual().cache
        assert found is not None
        causes.append((found.cause, found.diverged_at))
    assert causes[2] == ("client", Element("original", "prompt_cache_key"))
