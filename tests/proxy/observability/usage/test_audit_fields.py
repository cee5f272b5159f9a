"""What the audit record keeps of an exchange's spend and budget inputs."""

from __future__ import annotations

import pytest

from policies.pricing import Price, PriceTable, Usage
from proxy.observability.usage.audit_fields import KEYS, spend_fields, tools_of
from proxy.observability.usage.counterfactual import Counterfactuals
from proxy.observability.usage.spend import Sent, account
from tests import factories as f

PRICES = PriceTable.with_overrides([("gpt-4o*", Price(2.5, 1.25, 10.0))])
TOOL = {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}


def test_every_key_is_present_and_none_when_unknown() -> None:
    assert spend_fields(None, None) == dict.fromkeys(KEYS)


def test_output_limits_are_kept_when_they_are_integers() -> None:
    body = {"max_completion_tokens": 512, "max_tokens": True, "max_output_tokens": "9"}
    fields = spend_fields(None, body)
    assert (fields["max_completion_tokens"], fields["max_tokens"]) == (512, None)
    assert fields["max_output_tokens"] is None


def test_spend_fields_carry_usage_cost_and_the_resolved_window() -> None:
    history = [f.system("Be terse."), f.user("Fix it.")]
    sent = Sent.of("gpt-4o", {"tools": [TOOL]}, history, [], Usage(input=40, output=5))
    spend = account(sent, f.counter(), PRICES, Counterfactuals())
    fields = spend_fields(spend, {"tools": [TOOL]})
    assert fields["usage"] == {
        "input": 40,
        "cached": 0,
        "output": 5,
        "reasoning": 0,
        "cache_write": 0,
        "cache_write_1h": 0,
    }
    assert fields["context_window"] == f.counter().models.lookup("gpt-4o").context_window
    assert fields["encoding"] == "o200k_base"
    assert fields["conversation"] is None  # no session id: the writer keys it
    cost = fields["cost"]
    assert cost["price"] == "gpt-4o*"
    assert cost["actual_usd"] == pytest.approx((40 * 2.5 + 5 * 10.0) / 1e6)
    assert cost["uncurated"]["input"] > 0


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"tools": [TOOL]}, [TOOL]),
        ({"functions": [TOOL["function"]]}, [TOOL]),
        ({"tools": []}, None),
        (None, None),
    ],
)
def test_tools_as_sent_legacy_functions_wrapped(
    body: dict[str, object] | None, expected: list[object] | None
) -> None:
    assert tools_of(body) == expected
