"""summarizer: trigger, span, placement, cache reuse, folding, fail-open, async chain."""

from __future__ import annotations

import asyncio
import dataclasses
import textwrap
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import invariants
from policies.base import AsyncOnlyError, CurationContext, PinSpec
from policies.budget import TokenBudget
from policies.chain import Chain
from policies.errors import ConfigError
from policies.loader import load_policy
from policies.messages import SUMMARY_PREFIX, Message, role
from policies.summarizer import Summarizer
from policies.summary_cache import MemoryCache
from policies.summary_io import Completion, Services, SummaryRequest
from policies.summary_prompt import HEADER, summary_message
from policies.system import SystemPreservation
from policies.yamlsrc import parse
from tests import factories as f
from tests.policies.test_summary_cache import BrokenCache
from tests.strategies import conversations

pytestmark = pytest.mark.anyio

Msgs = list[dict[str, Any]]
SUMMARY = "The user asked questions; the assistant answered them."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the summarizer's timeouts use asyncio


class FakeComplete:
    """A `complete` callable that records its calls and answers, fails or hangs."""

    def __init__(
        self, reply: str = SUMMARY, *, fail: Exception | None = None, hang: bool = False
    ) -> None:
        self.reply, self.fail, self.hang = reply, fail, hang
        self.calls: list[tuple[list[Message], SummaryRequest]] = []

    async def __call__(self, messages: list[Message], request: SummaryRequest) -> Completion:
        self.calls.append((messages, request))
        if self.hang:
            await asyncio.Event().wait()
        if self.fail is not None:
            raise self.fail
        return Completion(self.reply, prompt_tokens=1000, completion_tokens=20)

    def prompt(self, k: int = -1) -> str:
        """The data (user) message of call `k`."""
        return str(self.calls[k][0][1]["content"])


def services(complete: FakeComplete, cache: MemoryCache | None = None) -> Services:
    caches = {"memory": cache if cache is not None else MemoryCache()}
    return Services(complete=complete, caches=caches)


def context(svc: Services | None, budget: int = 100_000, pins: PinSpec | None = None) -> Any:
    return dataclasses.replace(f.ctx(budget=budget, pins=pins), services=svc)


def chat(n_pairs: int, start: int = 0) -> Msgs:
    """A system prompt and `n_pairs` exchanges of about 25 tokens a message."""
    messages: Msgs = [f.system()]
    for i in range(start, start + n_pairs):
        messages.append(f.user(f"question {i}: " + f.long_text(18, "q")))
        messages.append(f.assistant(f"answer {i}: " + f.long_text(18, "a")))
    return messages


SMALL = Summarizer(
    upstream="cheap", model="gpt-4o-mini", trigger_tokens=1000, max_summary_tokens=60
)


def size(messages: Sequence[Message]) -> int:
    return sum(f.counter().count_message(m, "gpt-4o") for m in messages)


async def curate(s: Summarizer, messages: Msgs, svc: Services | None, **kw: Any) -> Any:
    ctx = context(svc, **kw)
    out = await s.acurate(messages, ctx)
    assert invariants.check(messages, out.messages, ctx) == []
    return out


async def test_below_the_trigger_nothing_happens() -> None:
    complete = FakeComplete()
    messages = chat(10)
    assert 800 < f.tokens(messages) <= 1000
    out = await curate(SMALL, messages, services(complete))
    assert out.messages == messages
    assert out.actions == ()
    assert complete.calls == []


async def test_the_oldest_span_becomes_one_assistant_summary_message() -> None:
    complete, messages = FakeComplete(), chat(30)
    svc = services(complete)
    out = await curate(SMALL, messages, svc)
    ((prompt, request),) = complete.calls
    assert request == SummaryRequest("cheap", "gpt-4o-mini", 60, 30.0)
    assert [role(m) for m in prompt] == ["system", "user"]
    summary = out.messages[1]
    assert summary == summary_message(SUMMARY)
    assert summary["role"] == "assistant"
    assert summary["content"].startswith(SUMMARY_PREFIX)
    assert not any(m["role"] == "user" and SUMMARY_PREFIX in m["content"] for m in out.messages)
    (action,) = out.actions
    span = list(action.indexes)
    assert span == list(range(1, span[-1] + 1))
    assert out.messages == [messages[0], summary, *messages[span[-1] + 1 :]]
    assert action.tokens_removed == size([messages[i] for i in span]) - size([summary])
    assert f.tokens(out.messages) <= SMALL.trigger(context(svc))
    assert svc.stats.calls == 1
    assert (svc.stats.prompt_tokens, svc.stats.completion_tokens) == (1000, 20)
    assert svc.stats.tokens_saved == action.tokens_removed
    assert action.reason == (
        f"summarized {len(span)} messages ({size([messages[i] for i in span]):,} tokens) "
        f"into {size([summary])} tokens; gpt-4o-mini read 1,000 and wrote 20 tokens"
    )


async def test_the_transcript_holds_exactly_the_span() -> None:
    complete, messages = FakeComplete(), chat(30)
    out = await curate(SMALL, messages, services(complete))
    span = out.actions[0].indexes
    prompt = complete.prompt()
    assert all(messages[i]["content"] in prompt for i in span)
    assert messages[span[-1] + 1]["content"] not in prompt
    assert messages[0]["content"] not in prompt  # the pinned system prompt is not data


async def test_curating_a_curated_list_changes_nothing() -> None:
    complete, messages = FakeComplete(), chat(30)
    svc = services(complete)
    once = await curate(SMALL, messages, svc)
    twice = await curate(SMALL, once.messages, svc)
    assert twice.messages == once.messages
    assert twice.actions == ()
    assert len(complete.calls) == 1


async def test_the_next_turn_reuses_the_cached_summary() -> None:
    complete, cache = FakeComplete(), MemoryCache()
    messages = chat(30)
    first = await curate(SMALL, messages, services(complete, cache))
    grown = [*messages, f.user("one more question"), f.assistant("one more answer")]
    svc = services(complete, cache)
    second = await curate(SMALL, grown, svc)
    assert len(complete.calls) == 1
    assert svc.stats.cache_hits == 1
    assert svc.stats.calls == 0
    assert second.actions[0].indexes == first.actions[0].indexes
    assert second.messages[: len(first.messages)] == first.messages
    assert second.actions[0].reason.endswith("; reused a cached summary")


async def test_a_replica_sharing_the_cache_agrees_on_span_and_key() -> None:
    cache, messages = MemoryCache(), chat(30)
    await curate(SMALL, messages, services(FakeComplete(), cache))
    replica = Summarizer(
        upstream="cheap", model="gpt-4o-mini", trigger_tokens=1000, max_summary_tokens=60
    )
    other = FakeComplete("a different summary")
    out = await curate(replica, messages, services(other, cache))
    assert other.calls == []
    assert out.messages[1] == summary_message(SUMMARY)


@pytest.mark.parametrize(
    "changed",
    [
        {"model": "gpt-4.1-mini"},
        {"max_summary_tokens": 61},
        {"prompt": "Summarize in French."},
        {"upstream": "other", "trigger_tokens": 1000},
    ],
)
async def test_the_cache_key_covers_the_settings_that_shape_a_summary(
    changed: dict[str, Any],
) -> None:
    cache, messages = MemoryCache(), chat(30)
    await curate(SMALL, messages, services(FakeComplete(), cache))
    again = FakeComplete()
    await curate(dataclasses.replace(SMALL, **changed), messages, services(again, cache))
    # The upstream does not shape the summary, so it shares the key; the rest do not.
    assert len(again.calls) == (0 if "upstream" in changed else 1)


async def test_growing_past_the_next_step_folds_the_cached_summary_with_new_messages() -> None:
    complete, cache = FakeComplete("FIRST SUMMARY"), MemoryCache()
    messages = chat(30)
    first = await curate(SMALL, messages, services(complete, cache))
    first_span = first.actions[0].indexes
    grown = chat(60)
    complete.reply = "SECOND SUMMARY"
    second = await curate(SMALL, grown, services(complete, cache))
    assert len(complete.calls) == 2
    span = second.actions[0].indexes
    assert span[: len(first_span)] == first_span
    assert len(span) > len(first_span)
    prompt = complete.prompt()
    assert "<prior-summary-" in prompt
    assert "FIRST SUMMARY" in prompt
    assert grown[first_span[0]]["content"] not in prompt  # already in the prior summary
    assert grown[span[-1]]["content"] in prompt
    assert second.messages[1] == summary_message("SECOND SUMMARY")
    assert second.actions[0].reason.endswith(", folding in an earlier summary")


async def test_a_summary_opening_the_span_is_folded_in_as_prior_context() -> None:
    complete = FakeComplete()
    old = summary_message("Earlier: the user set up the repo at /src/app.")
    messages = [f.system(), old, *chat(30)[1:]]
    out = await curate(SMALL, messages, services(complete))
    prompt = complete.prompt()
    prior = prompt.split("<prior-summary-", 1)[1].split("</prior-summary-", 1)[0]
    assert "Earlier: the user set up the repo at /src/app." in prior
    transcript = prompt.split("<transcript-", 1)[1]
    assert HEADER not in transcript
    assert out.actions[0].indexes[0] == 1
    assert out.messages[1] == summary_message(SUMMARY)


async def test_fail_open_returns_the_input_and_counts_the_failure() -> None:
    complete, messages = FakeComplete(fail=RuntimeError("upstream said 500")), chat(30)
    svc = services(complete)
    out = await curate(SMALL, messages, svc)
    assert out.messages == messages
    assert out.actions == ()
    assert (svc.stats.calls, svc.stats.failures) == (1, 1)
    assert svc.stats.errors == ["summarizer via cheap/gpt-4o-mini: RuntimeError: upstream said 500"]


async def test_a_call_that_outlives_timeout_s_fails_open() -> None:
    complete, messages = FakeComplete(hang=True), chat(30)
    svc = services(complete)
    out = await curate(dataclasses.replace(SMALL, timeout_s=0.01), messages, svc)
    assert out.messages == messages
    assert svc.stats.failures == 1
    assert svc.stats.errors == ["summarizer via cheap/gpt-4o-mini: timed out"]


async def test_an_empty_summary_is_a_failure() -> None:
    svc = services(FakeComplete("  \n"))
    out = await curate(SMALL, chat(30), svc)
    assert out.actions == ()
    assert svc.stats.errors[0].endswith("ValueError: the model returned an empty summary")


async def test_without_services_the_input_comes_back() -> None:
    messages = chat(30)
    out = await curate(SMALL, messages, None)
    assert out.messages == messages


async def test_a_broken_cache_still_summarizes() -> None:
    complete, broken = FakeComplete(), BrokenCache()
    svc = Services(complete=complete, caches={"memory": broken})
    out = await curate(SMALL, chat(30), svc)
    assert out.messages[1] == summary_message(SUMMARY)
    assert svc.stats.cache_errors == 2
    assert broken.asked[-1] == (broken.asked[0][0], SUMMARY)  # type: ignore[index]


async def test_an_overlong_summary_is_cut_to_max_summary_tokens() -> None:
    complete, messages = FakeComplete(f.long_text(500)), chat(30)
    out = await curate(SMALL, messages, services(complete))
    summary = out.messages[1]
    assert summary["content"].startswith(f"{HEADER}\n\nlorem0 lorem1")
    assert f.counter().count_message(summary, "gpt-4o") <= size([summary_message("")]) + 60
    assert f.tokens(out.messages) <= 1000
    assert (await curate(SMALL, out.messages, services(complete))).actions == ()


async def test_pins_in_the_span_stay_in_order_ahead_of_the_summary() -> None:
    messages = chat(30)
    messages.insert(5, f.system("Be brief now."))
    pins = PinSpec(first_user=True)
    out = await curate(SMALL, messages, services(FakeComplete()), pins=pins)
    assert out.messages[:4] == [messages[0], messages[1], messages[5], summary_message(SUMMARY)]
    assert 1 not in out.actions[0].indexes
    assert 5 not in out.actions[0].indexes


async def test_tool_blocks_are_summarized_whole_or_not_at_all() -> None:
    messages: Msgs = [f.system(), f.user("Fix the tests.")]
    for k in range(12):
        messages += [f.assistant_calls(f"c{k}", f"d{k}")]
        messages += [
            f.tool_result(f"d{k}", f.long_text(20)),
            f.tool_result(f"c{k}", f.long_text(20)),
        ]
    out = await curate(SMALL, messages, services(FakeComplete()))
    assert invariants.ordering_errors(out.messages) == []
    kept = out.messages[out.messages.index(summary_message(SUMMARY)) + 1]
    assert kept.get("tool_calls")  # the first kept message opens a block


async def test_keep_recent_turns_protects_the_newest_turns() -> None:
    messages = chat(30)
    summarizer = dataclasses.replace(SMALL, keep_recent_turns=25)
    out = await curate(summarizer, messages, services(FakeComplete()))
    newest_kept = len(messages) - 2 * 25
    assert max(out.actions[0].indexes) < newest_kept
    assert out.messages[-50:] == messages[-50:]


async def test_nothing_to_summarize_when_the_span_is_no_bigger_than_a_summary() -> None:
    complete = FakeComplete()
    messages = chat(30)
    summarizer = dataclasses.replace(SMALL, keep_recent_turns=29, max_summary_tokens=200)
    out = await curate(summarizer, messages, services(complete))
    assert out.actions == ()
    assert complete.calls == []


def test_trigger_is_a_ratio_of_the_budget_or_a_capped_token_count() -> None:
    ctx = f.ctx(budget=10_000)
    assert Summarizer(upstream="u", model="m").trigger(ctx) == 8000
    assert Summarizer(upstream="u", model="m", trigger_ratio=0.5).trigger(ctx) == 5000
    assert Summarizer(upstream="u", model="m", trigger_tokens=4000).trigger(ctx) == 4000
    assert Summarizer(upstream="u", model="m", trigger_tokens=40_000).trigger(ctx) == 10_000


def test_the_sync_api_refuses_an_async_curator() -> None:
    chain = Chain((SystemPreservation(), SMALL, TokenBudget()))
    assert chain.is_async
    assert not Chain((TokenBudget(),)).is_async
    with pytest.raises(AsyncOnlyError, match=r"summarizer await I/O and need the async API"):
        chain.run(chat(2), f.ctx())
    with pytest.raises(AsyncOnlyError, match=r"use Chain\.arun or Policy\.acurate"):
        SMALL.curate(chat(2), f.ctx())


async def test_arun_summarizes_then_enforces_the_budget() -> None:
    chain = Chain((SystemPreservation(), SMALL, TokenBudget()))
    messages = chat(30)
    ctx = context(services(FakeComplete()), budget=1000)
    result = await chain.arun(messages, ctx, check=True)
    assert [a.curator for a in result.actions] == ["summarizer"]
    assert result.tokens_after == f.tokens(result.messages) <= 1000
    # The newest 8 turns alone exceed 400 tokens: the summarizer cannot get there alone.
    keep = Chain(
        (SystemPreservation(), dataclasses.replace(SMALL, keep_recent_turns=8), TokenBudget())
    )
    result = await keep.arun(messages, context(services(FakeComplete()), budget=400), check=True)
    assert [a.curator for a in result.actions] == ["summarizer", "token_budget"]
    assert result.tokens_after <= 400


async def test_arun_falls_back_to_the_budget_when_the_summarizer_fails() -> None:
    chain = Chain((SMALL, TokenBudget()))
    svc = services(FakeComplete(fail=TimeoutError()))
    result = await chain.arun(chat(30), context(svc, budget=1000), check=True)
    assert [a.curator for a in result.actions] == ["token_budget"]
    assert result.tokens_after <= 1000
    assert svc.stats.failures == 1


POLICY = """
curators:
  - system_preservation: {}
  - summarizer:
      upstream: cheap
      model: gpt-4o-mini
      trigger_tokens: 1000
      max_summary_tokens: 60
  - token_budget: {}
"""


async def test_policy_acurate_hands_services_to_the_chain() -> None:
    located = parse(POLICY, "agents.yaml")
    policy = load_policy(located.data, name="agents", file="agents.yaml", lines=located.lines)
    assert policy.is_async
    complete = FakeComplete()
    body = {"model": "gpt-4o", "messages": chat(30)}
    result = await policy.acurate(chat(30), body, f.counter(), services=services(complete))
    assert result.messages[1] == summary_message(SUMMARY)
    assert len(complete.calls) == 1
    with pytest.raises(AsyncOnlyError):
        policy.curate(chat(30), body, f.counter())


@pytest.mark.parametrize(
    ("params", "problem"),
    [
        (
            "{model: m}",
            "agents.yaml:4: curators[0].summarizer: missing required parameter 'upstream'",
        ),
        ("{upstream: u}", "curators[0].summarizer: missing required parameter 'model'"),
        ("{upstream: '', model: m}", "summarizer.upstream: must be a non-empty string, got ''"),
        ("{upstream: u, model: 3}", "summarizer.model: must be a non-empty string, got 3"),
        ("{upstream: u, model: m, trigger_tokens: 0}", "summarizer.trigger_tokens: must be > 0"),
        (
            "{upstream: u, model: m, trigger_ratio: 1.5}",
            "trigger_ratio: must be in (0, 1], got 1.5",
        ),
        (
            "{upstream: u, model: m, trigger_tokens: 9, trigger_ratio: 0.5}",
            "summarizer.trigger_ratio: set trigger_tokens or trigger_ratio, not both",
        ),
        (
            "{upstream: u, model: m, summarize_ratio: 0}",
            "summarize_ratio: must be in (0, 1], got 0",
        ),
        (
            "{upstream: u, model: m, keep_recent_turns: -1}",
            "keep_recent_turns: must be >= 0, got -1",
        ),
        (
            "{upstream: u, model: m, keep_recent_turns: yes}",
            "keep_recent_turns: must be an integer",
        ),
        (
            "{upstream: u, model: m, max_summary_tokens: 0}",
            "max_summary_tokens: must be > 0, got 0",
        ),
        ("{upstream: u, model: m, timeout_s: 0}", "summarizer.timeout_s: must be > 0, got 0"),
        ("{upstream: u, model: m, timeout_s: soon}", "timeout_s: must be a number, got 'soon'"),
        ("{upstream: u, model: m, prompt: ' '}", "summarizer.prompt: must be a non-empty string"),
        ("{upstream: u, model: m, cache: 'memcached://x'}", 'summarizer.cache: must be "memory"'),
        (
            "{upstream: u, model: m, cahce: memory}",
            "unknown parameter 'cahce'; did you mean 'cache'?",
        ),
    ],
)
def test_the_loader_validates_every_parameter(params: str, problem: str) -> None:
    text = textwrap.dedent(
        f"""\
        context_window: 8000
        curators:
          # the summarizer
          - summarizer: {params}
        """
    )
    located = parse(text, "agents.yaml")
    with pytest.raises(ConfigError) as caught:
        load_policy(located.data, name="agents", file="agents.yaml", lines=located.lines)
    assert problem in str(caught.value)


def test_the_loader_builds_a_summarizer_with_every_parameter() -> None:
    text = """
curators:
  - summarizer:
      upstream: local
      model: llama-3.1-8b
      trigger_ratio: 0.7
      summarize_ratio: 0.4
      keep_recent_turns: 2
      max_summary_tokens: 800
      timeout_s: 12
      prompt: Keep file paths.
      cache: redis://cache:6379/1
"""
    located = parse(text, "p.yaml")
    policy = load_policy(located.data, name="p", file="p.yaml", lines=located.lines)
    (summarizer,) = policy.chain.curators
    assert summarizer == Summarizer(
        upstream="local",
        model="llama-3.1-8b",
        trigger_ratio=0.7,
        summarize_ratio=0.4,
        keep_recent_turns=2,
        max_summary_tokens=800,
        timeout_s=12.0,
        prompt="Keep file paths.",
        cache="redis://cache:6379/1",
    )


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    conversation=conversations(max_turns=8),
    fraction=st.floats(0.1, 1.0),
    pins=st.sampled_from([PinSpec(), PinSpec(first_user=True)]),
    keep=st.integers(0, 2),
)
def test_any_conversation_keeps_the_invariants_and_is_idempotent(
    conversation: Msgs, fraction: float, pins: PinSpec, keep: int
) -> None:
    budget = max(1, int(fraction * f.tokens(conversation)))
    summarizer = Summarizer(
        upstream="u", model="m", trigger_ratio=1.0, keep_recent_turns=keep, max_summary_tokens=30
    )
    ctx: CurationContext = context(services(FakeComplete()), budget=budget, pins=pins)
    out = asyncio.run(summarizer.acurate(conversation, ctx))
    assert invariants.check(conversation, out.messages, ctx) == []
    assert not any(role(m) == "user" and SUMMARY_PREFIX in str(m["content"]) for m in out.messages)
    again = asyncio.run(summarizer.acurate(out.messages, ctx))
    assert again.messages == out.messages
    assert again.actions == ()
