"""What curation sends must never be worse than what the client sent: never `messages: []`,
never a list the upstream rejects when the client's was accepted (judged by the strict fake's
rules, written independently of `policies/`)."""

from __future__ import annotations

from functools import cache
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.chain import Chain
from policies.coherence import ToolPairCoherence
from policies.loader import load_preset
from policies.models import ModelInfo, ModelTable
from policies.policy import Policy
from proxy.config.loader import Config, Route, ServerConfig, UpstreamConfig
from proxy.curation.plan import CurationSetup, Plan, plan_sync
from proxy.errors import ProxyError
from proxy.observability.exchange import ExchangeRecord
from proxy.protocols.chat import CHAT as CHAT_API
from tests import factories as f
from tests.fakes.openai_rules import check_ordering
from tests.strategies import any_message_lists

TINY_MODEL = "gpt-4o-tiny"
"""A small window, so the budget curators act on generated conversations too."""
POLICIES = ("coherence", "default", "coding-agent", "chat")
CHAT = "/v1/chat/completions"


@cache
def _setup() -> CurationSetup:
    policies = {name: load_preset(name) for name in POLICIES[1:]}
    policies["coherence"] = Policy("coherence", Chain((ToolPairCoherence(),)))
    config = Config(
        source="<test>",
        server=ServerConfig(),
        upstreams={"main": UpstreamConfig("main", "http://upstream.test/v1")},
        policies=policies,
        routes=(Route("main", "main", "coherence", allow_policy_header=True),),
        models=ModelTable.with_overrides([(TINY_MODEL, ModelInfo(3_000))]),
    )
    return CurationSetup(config, f.counter())


def _plan(messages: list[dict[str, Any]], policy: str, model: str) -> tuple[Plan, ExchangeRecord]:
    raw = orjson.dumps({"model": model, "messages": messages})
    record = ExchangeRecord("r", 0.0, "POST", CHAT)
    plan = plan_sync(CHAT_API, raw, {"x-curator-policy": policy}, _setup(), record, None)
    assert isinstance(plan, Plan)
    return plan, record


@pytest.mark.parametrize(
    "messages",
    [
        [{"role": "function", "content": None, "name": None}],
        [{"role": "tool", "tool_call_id": "gone", "content": "stale"}],
        [{"role": "assistant", "content": None}],
    ],
)
def test_a_request_curation_would_empty_goes_as_sent(messages: list[dict[str, Any]]) -> None:
    plan, record = _plan(messages, "coherence", "gpt-4o")
    assert record.skip_reason == "curated_empty"
    assert (b"x-curator-skipped", b"curated_empty") in plan.headers
    assert plan.body == orjson.dumps({"model": "gpt-4o", "messages": messages})


@settings(max_examples=150, deadline=None)
@given(any_message_lists, st.sampled_from(POLICIES), st.sampled_from(["gpt-4o", TINY_MODEL]))
def test_curation_never_sends_an_empty_or_newly_rejected_list(
    messages: list[dict[str, Any]], policy: str, model: str
) -> None:
    try:
        plan, record = _plan(messages, policy, model)
    except ProxyError as err:  # a preset's on_overflow: reject answers 400 itself
        rejected = err.code
    else:
        rejected = None
    if rejected is not None:
        assert rejected == "context_length_exceeded"
        return
    sent = orjson.loads(plan.body)["messages"]
    assert sent, "curation forwarded messages: []"
    if check_ordering(messages) is None:
        assert check_ordering(sent) is None
    if record.skip_reason is not None:
        assert plan.body == orjson.dumps({"model": model, "messages": messages})
