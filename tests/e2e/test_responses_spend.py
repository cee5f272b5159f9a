"""Spend for the Responses API, end to end: the openai SDK's `responses.create` (streamed and
not) through the real proxy, against a fake reporting `input_tokens_details.cached_tokens`;
the upstream-token and cost metrics move exactly as the usage the client received says."""

from __future__ import annotations

import time

import httpx
import pytest
from openai import OpenAI
from prometheus_client.parser import text_string_to_metric_families

from policies.pricing import PriceTable, Usage, cost
from tests.fakes import responses_items as r
from tests.fakes.upstream import Behavior, FakeOpenAI

pytestmark = pytest.mark.e2e

LABELS = {"route": "default", "policy": "agent", "model": "gpt-4o*"}
Spend = dict[tuple[str, str], float]


def spend(http: httpx.Client) -> Spend:
    """(family, kind) -> value for the default route's gpt-4o series."""
    out: Spend = {}
    for family in text_string_to_metric_families(http.get("/metrics").text):
        for s in family.samples:
            if s.name in ("curator_upstream_tokens_total", "curator_cost_usd_total") and all(
                s.labels.get(k) == v for k, v in LABELS.items()
            ):
                out[(s.name, s.labels["kind"])] = s.value
    return out


def settled(http: httpx.Client, before: Spend, input_tokens: int) -> Spend:
    """The metrics once both requests are counted (they are, just after their responses)."""
    for _ in range(200):
        now = spend(http)
        key = ("curator_upstream_tokens_total", "input")
        if now.get(key, 0.0) - before.get(key, 0.0) >= input_tokens:
            return now
        time.sleep(0.02)
    raise AssertionError("the upstream tokens never showed up in /metrics")


def test_responses_usage_and_cost_reach_the_metrics(
    openai_client: OpenAI, fake: FakeOpenAI, http: httpx.Client
) -> None:
    long_input = [r.user("Summarize this log:\n" + "error: disk full on /var\n" * 600)]
    before = spend(http)
    fake.queue(Behavior(reply="Disk full."))
    plain = openai_client.responses.create(model="gpt-4o", input=long_input)
    fake.queue(Behavior(reply="Disk full."))
    with openai_client.responses.stream(model="gpt-4o", input=long_input) as stream:
        streamed = stream.get_final_response()
    usages = [u for u in (plain.usage, streamed.usage) if u is not None]
    assert len(usages) == 2
    inputs = sum(u.input_tokens for u in usages)
    cached = sum(u.input_tokens_details.cached_tokens for u in usages)
    outputs = sum(u.output_tokens for u in usages)
    assert cached > 0, "the fake caches half of every full 1,024-token block"
    after = settled(http, before, inputs)

    def delta(name: str, kind: str) -> float:
        return after.get((name, kind), 0.0) - before.get((name, kind), 0.0)

    assert delta("curator_upstream_tokens_total", "input") == inputs
    assert delta("curator_upstream_tokens_total", "cached") == cached
    assert delta("curator_upstream_tokens_total", "output") == outputs
    found = PriceTable().find("gpt-4o")
    assert found is not None
    paid = sum(
        cost(Usage(u.input_tokens, u.input_tokens_details.cached_tokens, u.output_tokens), found[1])
        for u in usages
    )
    assert delta("curator_cost_usd_total", "actual") == pytest.approx(paid)
