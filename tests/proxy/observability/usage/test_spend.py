"""One exchange's spend: usage and actual cost at once, the uncurated counterfactual when a
thread asks for it, priced with the same table."""

from __future__ import annotations

import pytest

from policies.pricing import Price, PriceTable, Usage, cost
from policies.tokens import REPLY_PRIMING
from proxy.observability.usage import spend as spend_module
from proxy.observability.usage.counterfactual import Counterfactuals
from proxy.observability.usage.spend import Sent, account, uncurated_prompt
from tests import factories as f

PRICE = Price(input=2.5, cached_input=1.25, output=10.0)
PRICES = PriceTable.with_overrides([("gpt-4o*", PRICE)])
HISTORY = [f.system("You are terse."), f.user("Fix the failing test in m.")]
TOOL = {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}


def sent(original: list[dict[str, object]] | None, usage: Usage | None = None) -> Sent:
    headers = [(b"X-Session-Id", b"run-7")]
    return Sent.of("gpt-4o", {"tools": [TOOL]}, original, headers, usage)


def test_usage_and_actual_cost_are_known_at_once() -> None:
    usage = Usage(input=900, cached=0, output=40)
    spend = account(sent(HISTORY, usage), f.counter(), PRICES, Counterfactuals())
    assert spend.usage == usage
    assert spend.price_model == "gpt-4o*"
    assert spend.actual_usd == pytest.approx(cost(usage, PRICE))
    assert not spend.deferred.ready  # the uncurated prompt waits for a thread


def test_asked_for_now_the_counterfactual_is_known_at_once() -> None:
    usage = Usage(input=30, cached=0, output=40)
    spend = account(sent(HISTORY, usage), f.counter(), PRICES, Counterfactuals(), now=True)
    assert spend.deferred.ready
    assert spend.counterfactual().uncurated is not None


def test_the_counterfactual_prices_the_uncurated_prompt_with_tools() -> None:
    usage = Usage(input=30, cached=0, output=40, reasoning=5)
    spend = account(sent(HISTORY, usage), f.counter(), PRICES, Counterfactuals())
    found = spend.counterfactual()
    assert spend.deferred.ready
    prompt_tokens = f.tokens(HISTORY) + f.counter().count_tools([TOOL], "gpt-4o")
    assert found.uncurated == Usage(prompt_tokens, 0, 40, 5)
    assert found.uncurated_usd == pytest.approx(cost(Usage(prompt_tokens, 0, 40), PRICE))
    assert (found.session, found.conversation) == ("run-7", "run-7")
    assert found.context_window == f.counter().models.lookup("gpt-4o").context_window


def test_the_uncurated_prompt_writes_the_same_share_of_its_uncached_tokens() -> None:
    # The upstream wrote 3/4 of the request's uncached tokens (1/4 of them for an hour).
    usage = Usage(input=500, cached=100, output=40, written=200, written_1h=100)
    found = account(sent(HISTORY, usage), f.counter(), PRICES, Counterfactuals()).counterfactual()
    assert found.uncurated is not None
    uncached = found.uncurated.input - found.uncurated.cached
    assert (found.uncurated.written, found.uncurated.written_1h) == (
        round(uncached / 2),
        round(uncached / 4),
    )
    assert found.uncurated_usd == pytest.approx(cost(found.uncurated, PRICE))


def test_a_passthrough_is_its_own_counterfactual_and_known_at_once() -> None:
    usage = Usage(input=12, output=3)
    spend = account(sent(None, usage), f.counter(), PRICES, Counterfactuals())
    assert spend.deferred.ready
    found = spend.counterfactual()
    assert found.uncurated is None
    assert found.uncurated_usd == pytest.approx(cost(usage, PRICE))


def test_an_unpriced_model_has_no_cost() -> None:
    nothing = Sent.of("my-local-llama", None, HISTORY, [], Usage(input=10))
    spend = account(nothing, f.counter(), PriceTable.with_overrides([]), Counterfactuals())
    assert (spend.price_model, spend.actual_usd) == (None, None)
    assert spend.counterfactual().uncurated_usd is None


def test_the_uncurated_prompt_is_tools_each_message_and_the_reply_priming() -> None:
    prompt = uncurated_prompt(HISTORY, f.counter(), "gpt-4o", [TOOL], Counterfactuals())
    assert len(prompt.blocks) == 1 + len(HISTORY) + 1
    assert prompt.blocks[-1].tokens == REPLY_PRIMING
    assert prompt.tokens == f.tokens(HISTORY) + f.counter().count_tools([TOOL], "gpt-4o")


def test_the_curations_keys_give_the_same_counterfactual() -> None:
    """The keys curation made (`ExchangeRecord.keys`) stand in for hashing the history again."""
    counter = f.counter()
    keys = tuple(counter.measure(HISTORY, "gpt-4o")[0])
    usage = Usage(input=30, cached=0, output=40)
    headers = [(b"X-Session-Id", b"run-7")]
    keyed = Sent.of("gpt-4o", {"tools": [TOOL]}, HISTORY, headers, usage, keys)
    with_keys = account(keyed, counter, PRICES, Counterfactuals()).counterfactual()
    without = account(sent(HISTORY, usage), counter, PRICES, Counterfactuals()).counterfactual()
    assert with_keys == without
    prompt = uncurated_prompt(HISTORY, counter, "gpt-4o", [TOOL], Counterfactuals(), keys)
    assert [b.key for b in prompt.blocks[1:-1]] == list(keys)


def test_the_curations_counts_are_used_without_counting_again() -> None:
    """With a key and a count for every message (`ExchangeRecord.counts`), the uncurated
    prompt is priced from them: counts that differ from the counter's show it."""
    counter = f.counter()
    keys, real = counter.measure(HISTORY, "gpt-4o")
    given = [n + 1 for n in real]
    prompt = uncurated_prompt(HISTORY, counter, "gpt-4o", [], Counterfactuals(), keys, given)
    assert [b.tokens for b in prompt.blocks[:-1]] == given
    assert [b.key for b in prompt.blocks[:-1]] == keys
    # A key missing (or no counts): the counter counts, as before.
    partial = [None, *keys[1:]]
    counted = uncurated_prompt(HISTORY, counter, "gpt-4o", [], Counterfactuals(), partial, given)
    assert [b.tokens for b in counted.blocks[:-1]] == real


def test_a_tools_list_seen_again_is_hashed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests share an equal tools list (the proxy's `SharedTools`): the counterfactual's
    block key for it is made once; an equal list that is another object gets the same key,
    made again."""
    made: list[object] = []
    real = spend_module._tools_digest
    monkeypatch.setattr(spend_module, "_tools_digest", lambda v: made.append(v) or real(v))
    counter, history, tools = f.counter(), Counterfactuals(), [TOOL]
    usage = Usage(input=30, cached=0, output=40)
    for listed in (tools, tools, [dict(TOOL)]):
        sent = Sent.of("gpt-4o", {"tools": listed}, HISTORY, [], usage)
        account(sent, counter, PRICES, history).counterfactual()
    assert len(made) == 2
    assert made[0] is tools
