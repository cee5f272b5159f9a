"""Cache-miss attribution on block prompts: each cause, and the split of a turn's tokens."""

from __future__ import annotations

from policies.prefix_cache import Block, PrefixCache, Prompt
from proxy.observability.usage.attribution import CacheMiss, Element, Turn, attribute, turn_of
from proxy.observability.usage.counterfactual import Attributed, Counterfactuals

CACHE = PrefixCache()
PRIMING = Block(b"\0p", 3)


def prompt(*blocks: tuple[str, int]) -> Prompt:
    """Blocks named by a letter, each with its tokens, then the reply priming."""
    return Prompt((*(Block(name.encode(), n) for name, n in blocks), PRIMING))


def turn(client: Prompt, upstream: Prompt | None = None, model: str = "m") -> Turn:
    return turn_of(model, client, upstream or client, tools=False)


def same(p: Prompt) -> list[int]:
    return list(range(len(p.blocks)))


TURN_1 = prompt(("s", 2000), ("u", 500), ("a", 500))
TURN_2 = prompt(("s", 2000), ("u", 500), ("a", 500), ("t", 800))


def test_the_first_turn_of_a_conversation() -> None:
    found = attribute(None, turn(TURN_1), same(TURN_1), 0, CACHE)
    assert (found.cause, found.rebilled_tokens) == ("first_turn", 0)


def test_a_turn_that_only_appends_and_gets_its_credit_misses_nothing() -> None:
    found = attribute(turn(TURN_1), turn(TURN_2), same(TURN_2), 2944, CACHE)
    assert (found.cause, found.rebilled, found.expected, found.predicted) == (
        "none",
        {},
        2944,
        2944,
    )
    assert found.diverged_at is None


def test_a_client_edit_is_the_clients() -> None:
    edited = prompt(("s", 2000), ("U", 500), ("a", 500), ("t", 800))
    found = attribute(turn(TURN_1), turn(edited), same(edited), 1920, CACHE)
    assert found.cause == "client"
    assert found.rebilled == {"client": 2944 - 1920}
    assert found.diverged_at == Element("original", "message", 1)


def test_a_curation_cut_where_the_client_held_is_curations() -> None:
    cut = prompt(("s", 2000), ("x", 40), ("a", 500), ("t", 800))
    origins = [0, 1, 2, 3, 4]
    found = attribute(turn(TURN_1), turn(TURN_2, cut), origins, 1920, CACHE)
    assert found.cause == "curation"
    assert found.rebilled == {"curation": 2944 - 1920}
    assert found.diverged_at == Element("curated", "message", 1)


def test_both_moved_the_client_pays_for_its_own_edit_and_curation_for_the_rest() -> None:
    last = prompt(("s", 2000), ("u", 500), ("a", 500), ("b", 3000))
    client = prompt(("s", 2000), ("u", 500), ("a", 500), ("B", 3000), ("t", 10))
    # curation replaced `u` with a placeholder: the upstream parts at block 1, the client at 3
    upstream = prompt(("s", 2000), ("x", 20), ("a", 500), ("B", 3000), ("t", 10))
    found = attribute(turn(last), turn(client, upstream), [0, 1, 2, 3, 4, 5], 1920, CACHE)
    expected = CACHE.cacheable(6000)
    assert found.rebilled == {"client": expected - 2944, "curation": 2944 - 1920}
    assert found.cause == "client"  # the larger share
    assert found.client_at == Element("original", "message", 3)
    assert found.upstream_at == Element("curated", "message", 1)


def test_a_shortfall_where_both_held_is_expiry_beyond_the_tolerance() -> None:
    found = attribute(turn(TURN_1), turn(TURN_2), same(TURN_2), 0, CACHE)
    assert (found.cause, found.rebilled) == ("expiry", {"expiry": 2944})
    close = attribute(turn(TURN_1), turn(TURN_2), same(TURN_2), 2816, CACHE)
    assert (close.cause, close.rebilled) == ("none", {}), "one step off: our count, not a miss"


def test_another_model_is_a_model_change() -> None:
    found = attribute(turn(TURN_1), turn(TURN_2, model="n"), same(TURN_2), 0, CACHE)
    assert (found.cause, found.rebilled) == ("model_change", {"model_change": 2944})


def test_a_client_edit_curation_dropped_costs_the_client_nothing() -> None:
    # The client edited `b`; curation drops `b` (this turn and the last): the upstream held.
    last_client = prompt(("s", 2000), ("b", 100), ("a", 1000))
    last_up = prompt(("s", 2000), ("a", 1000))
    client = prompt(("s", 2000), ("B", 100), ("a", 1000), ("t", 5))
    upstream = prompt(("s", 2000), ("a", 1000), ("t", 5))
    found = attribute(turn(last_client, last_up), turn(client, upstream), [0, 2, 3, 4], 2944, CACHE)
    assert (found.cause, found.rebilled) == ("client", {}), "parted, but nothing re-billed"


def test_the_counterfactuals_slot_keeps_the_last_turn_and_counts_its_bytes() -> None:
    history = Counterfactuals()
    history.attribute("c", "m", Attributed(TURN_1, TURN_1, same(TURN_1), 0, False))
    held = history.bytes
    cached, found = history.attribute("c", "m", Attributed(TURN_2, TURN_2, same(TURN_2), 0, False))
    assert cached == 2944, "the uncurated prompt's prefix model still runs"
    assert found.cause == "expiry"
    assert history.bytes > held
    _, other = history.attribute("d", "m", Attributed(TURN_2, TURN_2, same(TURN_2), 0, False))
    assert other.cause == "first_turn"


def test_the_spend_attributes_a_curated_turn_by_the_messages_curation_kept() -> None:
    from policies.pricing import Price, PriceTable, Usage
    from proxy.observability.usage.spend import Sent, account
    from tests import factories as f

    prices = PriceTable.with_overrides([("gpt-4o*", Price(2.5, 1.25, 10.0))])
    history = Counterfactuals()
    big = "word " * 1500
    first = [f.system("Be terse."), f.user(big), f.assistant("ok " * 600)]
    second = [*first, f.user("next")]
    cut = [first[0], f.user("[removed]"), first[2], second[3]]

    def turn(original: list[dict[str, object]], upstream: object, cached: int) -> CacheMiss:
        usage = Usage(input=4000, cached=cached, output=5)
        sent = Sent.of("gpt-4o", {}, original, [(b"x-session-id", b"s")], usage, upstream=upstream)  # type: ignore[arg-type]
        found = account(sent, f.counter(), prices, history).counterfactual().cache
        assert found is not None
        return found

    assert turn(first, None, 0).cause == "first_turn"
    found = turn(second, cut, 0)
    assert found.cause == "curation"
    assert found.diverged_at == Element("curated", "message", 1)
    assert found.as_json(1e-6)["rebilled_usd"]["curation"] > 0


def test_the_sent_prompt_reuses_kept_blocks_and_derives_rewritten_ones_from_the_next() -> None:
    from proxy.observability.usage.sent_prompt import sent_prompt
    from tests import factories as f

    counter = f.counter()
    original = [f.system("s"), f.user("a"), f.assistant("b"), f.user("c"), f.user("d")]
    client = Prompt((Block(b"T", 50), *(Block(bytes([i]), 10) for i in range(5)), Block(b"\0p", 3)))
    # b dropped, c rewritten: [s, a, c', d]
    sent = [original[0], original[1], f.user("[cut]"), original[4]]
    upstream, origins = sent_prompt(client, original, sent, counter, "gpt-4o")
    assert [b.key for b in upstream.blocks[:3]] == [b"T", bytes([0]), bytes([1])]
    assert upstream.blocks[3].key not in {b.key for b in client.blocks}
    assert upstream.blocks[4] is client.blocks[5]
    assert origins == [0, 1, 2, 3, 5, 6]
