"""UpstreamFacts: hints per (upstream, model), the assumed-window warning, metric labels."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx
import orjson
import pytest

from policies.calibration import NEUTRAL, BudgetHints, Observation
from policies.models import ModelInfo, ModelTable
from policies.policy import Policy
from policies.tokens import TokenCounter
from proxy.config.loader import UpstreamConfig
from proxy.observability.exchange import ExchangeRecord
from proxy.protocols.base import Usage
from proxy.upstream.facts import MAX_STATED, UpstreamFacts, learn, sent_tokens
from proxy.upstream.httpx_client import HttpxClient

FUNCTION = {"name": "read_file", "description": "Read a file", "parameters": {"type": "object"}}


class Sink:
    def __init__(self) -> None:
        self.assumed: list[str] = []
        self.labels: list[tuple[str, str, float]] = []
        self.rescues: list[tuple[str, bool]] = []

    def calibrated(self, upstream: str, label: str, observation: Observation) -> None:
        self.labels.append((upstream, label, observation.ratio))

    def window_assumed(self, upstream: str) -> None:
        self.assumed.append(upstream)

    def rescued(self, upstream: str, retried: bool) -> None:
        self.rescues.append((upstream, retried))


def test_hints_start_neutral_and_follow_the_calibration() -> None:
    facts = UpstreamFacts()
    assert facts.hints("u", "m") is NEUTRAL
    table = ModelTable()
    facts.learn("u", "m", 1000, 1250, table)
    facts.learn("u", "m", 1000, 1250, table)
    assert facts.hints("u", "m") == BudgetHints(None, pytest.approx(1.25))
    assert facts.hints("other", "m") is NEUTRAL


def test_a_window_an_overflow_stated_is_kept_for_the_model() -> None:
    facts = UpstreamFacts()
    facts.overflowed("u", "m", 32768)
    assert facts.hints("u", "m") == BudgetHints(32768, 1.0)
    assert facts.hints("u", "other") is NEUTRAL
    assert facts.hints("v", "m") is NEUTRAL
    facts.overflowed("u", "m", 16384)  # the upstream's latest word
    assert facts.hints("u", "m").window == 16384
    assert not facts.assumed("u", "m", Policy("p"), ModelTable(), facts.hints("u", "m"))


def test_a_stated_window_beats_the_model_lists() -> None:
    facts = UpstreamFacts()
    listing = orjson.dumps({"data": [{"id": "m", "max_model_len": 65536}]})

    async def discover() -> None:
        transport = httpx.MockTransport(lambda _req: httpx.Response(200, content=listing))
        await facts.windows.discover(HttpxClient(transport), [UpstreamConfig("u", "http://u")])

    asyncio.run(discover())
    assert facts.hints("u", "m").window == 65536
    facts.overflowed("u", "m", 32768)
    assert facts.hints("u", "m").window == 32768


def test_stated_windows_are_bounded_and_the_least_recent_go_first() -> None:
    facts = UpstreamFacts()
    for k in range(MAX_STATED):
        facts.overflowed("u", f"m{k}", 1000 + k)
    facts.overflowed("u", "m0", 999)  # stated again: now the most recent
    facts.overflowed("u", "new", 4096)
    assert facts.hints("u", "m1") is NEUTRAL
    assert facts.hints("u", "m0").window == 999
    assert facts.hints("u", "new").window == 4096
    assert facts.hints("u", f"m{MAX_STATED - 1}").window == 1000 + MAX_STATED - 1


def test_an_unknown_window_is_said_once_and_counted_every_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sink = Sink()
    facts = UpstreamFacts(sink)
    table = ModelTable()
    with caplog.at_level(logging.WARNING, "curator.models"):
        assert facts.assumed("u", "mystery", Policy("p"), table, NEUTRAL)
        assert facts.assumed("u", "mystery", Policy("p"), table, NEUTRAL)
    assert sink.assumed == ["u", "u"]
    assert len([r for r in caplog.records if "mystery" in r.getMessage()]) == 1
    # Known: by the table, by the upstream's list, by the policy, by a reloaded table.
    assert not facts.assumed("u", "gpt-4o", Policy("p"), table, NEUTRAL)
    assert not facts.assumed("u", "mystery", Policy("p"), table, BudgetHints(8192))
    assert not facts.assumed("u", "mystery", Policy("p", context_window=8192), table, NEUTRAL)
    reloaded = ModelTable.with_overrides([("myst*", ModelInfo(4096))])
    assert not facts.assumed("u", "mystery", Policy("p"), reloaded, NEUTRAL)


def test_metric_labels_never_carry_a_client_name() -> None:
    sink = Sink()
    facts = UpstreamFacts(sink)
    table = ModelTable.with_overrides([("house-*", ModelInfo(8192))])
    for model in ("house-coder", "Meta/Llama-3.1-8B", "x9$random"):
        facts.learn("u", model, 100, 110, table)
    assert [label for _, label, _ in sink.labels] == ["house-*", "*llama-3.[123]*", "other"]


class NoTools(TokenCounter):
    def count_tools(self, tools: Any, model: str) -> int:  # noqa: ARG002 (the signature)
        raise AssertionError("the budget's count of the tools is used")


def test_the_calibration_learns_the_prompt_as_the_budget_counted_it() -> None:
    """The curated messages plus the tools as the budget counted them: not counted again
    (the Responses form's flat tools, read by the chat renderer, would count short)."""
    facts = UpstreamFacts()
    values: dict[str, Any] = {"status": 200, "upstream": "u", "model": "m", "mode": "enforce"}
    record = ExchangeRecord("r", 0.0, "POST", "/v1/responses", **values)
    record.tokens_after, record.tools_tokens = 1000, 500
    record.body = {"model": "m", "input": [], "tools": [{"type": "function", **FUNCTION}]}
    assert sent_tokens(1000, record) == 1500
    for _ in range(2):
        learn(facts, record, NoTools(), Usage(input_tokens=1875))
    assert facts.hints("u", "m").scale == pytest.approx(1.25)
