"""Cache reads and writes, from the strict Anthropic fake's usage to dollars."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import tiktoken

from policies.pricing import PriceTable, cost
from proxy.observability.usage.tap import from_wire
from proxy.protocols.anthropic.protocol import ANTHROPIC
from tests.fakes.anthropic_cache import MessagesCache, prompt_tokens

ENC = tiktoken.get_encoding("cl100k_base")
MODEL = "claude-sonnet-4-5"


def turn(n: int, ttl: str) -> dict[str, Any]:
    mark: dict[str, Any] = {"type": "ephemeral", "ttl": ttl}
    system = [{"type": "text", "text": "Be careful. " * 400, "cache_control": mark}]
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "x " * 300}
        for i in range(n)
    ]
    last = {
        "type": "text",
        "text": f"now {n} " + "y " * 600,
        "cache_control": {"type": "ephemeral"},
    }
    messages.append({"role": "user", "content": [last]})
    return {"model": MODEL, "system": system, "messages": messages}


def test_a_replays_cost_is_the_fakes_usage_at_the_price_writes_included() -> None:
    cache = MessagesCache()
    price = PriceTable().find(MODEL)
    assert price is not None
    p = price[1]
    seen = {"read": 0, "5m": 0, "1h": 0}
    for n in (0, 2, 4):
        body = turn(n, "1h")
        said = cache.usage(body, prompt_tokens(body, ENC))
        said["output_tokens"] = 50
        usage = from_wire(ANTHROPIC.usage(orjson.dumps({"type": "message", "usage": said})))
        assert usage is not None
        split = said["cache_creation"]
        ours = (
            said["input_tokens"] * p.input
            + said["cache_read_input_tokens"] * p.cached_input
            + split["ephemeral_5m_input_tokens"] * p.write
            + split["ephemeral_1h_input_tokens"] * p.write_1h
            + 50 * p.output
        ) / 1e6
        assert cost(usage, p) == pytest.approx(ours, abs=1e-6)
        seen["read"] += said["cache_read_input_tokens"]
        seen["5m"] += split["ephemeral_5m_input_tokens"]
        seen["1h"] += split["ephemeral_1h_input_tokens"]
    assert all(seen.values()), seen  # the replay read, and wrote at both TTLs
