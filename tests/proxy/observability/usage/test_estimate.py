"""Encrypted reasoning: the uncurated prompt's tokens as an estimate with a range."""

from __future__ import annotations

import math

import orjson
import pytest

from policies.pricing import Price, PriceTable, Usage, cost
from proxy.observability.usage.audit_fields import spend_fields
from proxy.observability.usage.counterfactual import Counterfactuals
from proxy.observability.usage.estimate import ENCRYPTED_REASONING, estimate, reasoning_tokens
from proxy.observability.usage.spend import Sent, account
from tests import factories as f

SECRET = {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAA" + "x9Q/" * 3000}
HISTORY = [
    {"role": "user", "content": "fix the bug"},
    {"role": "assistant", "content": [SECRET, {"type": "text", "text": "done"}]},
    {"role": "user", "content": "thanks, and the test?"},
]
PRICE = Price(1.25, 0.125, 10.0)
PRICES = PriceTable.with_overrides([("m*", PRICE)])


def test_only_encrypted_reasoning_parts_count() -> None:
    plain = [{"role": "assistant", "content": [{"type": "reasoning", "summary": []}]}]
    assert reasoning_tokens(plain, f.counter(), "gpt-4o") == 0
    size = math.ceil(len(orjson.dumps(SECRET)) / 4)  # past 8 KiB: 4 bytes a token
    assert reasoning_tokens(HISTORY, f.counter(), "gpt-4o") == size


def test_without_the_upstreams_count_the_figure_is_the_high_end() -> None:
    found = estimate(5000, 3000, sent=None, billed=None)
    assert (found.value, found.low, found.high) == (5000, 2000, 5000)
    assert found.reason == ENCRYPTED_REASONING
    assert not found.learned
    assert estimate(5000, 3000, sent=4000, billed=4100).value == 5000, "we did not count high"


def test_the_upstreams_count_scales_the_figure_within_the_range() -> None:
    found = estimate(5000, 3000, sent=4000, billed=2400)
    assert (found.value, found.learned) == (3000, True)
    assert estimate(5000, 3000, sent=4000, billed=100).value == 2000, "never below low"


def test_the_counterfactual_of_a_reasoning_prompt_is_learned_and_ranged() -> None:
    counter = f.counter()
    counted = counter.count_messages(HISTORY, "m-1")
    billed = counted - 2700  # the upstream decrypted 300 tokens of reasoning, not 3,000
    usage = Usage(input=billed, cached=0, output=20)
    sent = Sent("m-1", {}, HISTORY, None, usage, counted_sent=counted)
    found = account(sent, counter, PRICES, Counterfactuals(), now=True).counterfactual()
    assert found.estimate is not None
    assert found.estimate.learned
    assert found.uncurated is not None
    assert found.uncurated.input == billed
    assert found.uncurated_usd == pytest.approx(cost(usage, PRICE))
    assert found.range_usd is not None
    low, high = found.range_usd
    assert low < found.uncurated_usd < high
    assert high == pytest.approx(cost(Usage(counted, 0, 20), PRICE))


def test_a_prompt_without_reasoning_is_exact() -> None:
    usage = Usage(input=10, output=2)
    sent = Sent("m-1", {}, HISTORY[:1], None, usage, counted_sent=10)
    found = account(sent, f.counter(), PRICES, Counterfactuals(), now=True).counterfactual()
    assert (found.estimate, found.range_usd) == (None, None)


def test_the_audit_record_keeps_the_estimate_and_its_range() -> None:
    counted = f.counter().count_messages(HISTORY, "m-1")
    sent = Sent("m-1", {}, HISTORY, None, Usage(input=counted, output=2), counted_sent=counted)
    spend = account(sent, f.counter(), PRICES, Counterfactuals(), now=True)
    kept = spend_fields(spend, {})["cost"]["uncurated_estimate"]
    assert kept["reason"] == ENCRYPTED_REASONING
    assert kept["learned"] is False, "the upstream billed what we counted: nothing learned"
    assert kept["input_range"][1] == counted
    assert kept["usd_range"] == list(spend.counterfactual().range_usd or ())
