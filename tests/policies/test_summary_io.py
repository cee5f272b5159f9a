"""What a summarizer exchanges with the outside (`policies.summary_io`): value types that
cannot change under a request, and per-request stats that are never shared.

The module is declarations only; what is tested is what callers rely on: defaults, that
nothing mutable is shared between instances, and that frozen and slotted types refuse
writes (a misspelt counter fails loudly instead of being dropped)."""

from __future__ import annotations

import dataclasses

import pytest

from policies.messages import Message
from policies.summary_io import Completion, Services, SummaryRequest, SummaryStats


async def complete(messages: list[Message], request: SummaryRequest) -> Completion:
    return Completion(f"{len(messages)} for {request.model}")


def test_a_completion_without_usage_reports_zero() -> None:
    done = Completion("summary")
    assert (done.text, done.prompt_tokens, done.completion_tokens) == ("summary", 0, 0)


def test_requests_and_completions_are_values() -> None:
    request = SummaryRequest("openai", "gpt-4o-mini", 300, 5.0)
    assert request == SummaryRequest("openai", "gpt-4o-mini", 300, 5.0)
    assert hash(request) == hash(SummaryRequest("openai", "gpt-4o-mini", 300, 5.0))
    assert request != SummaryRequest("openai", "gpt-4o-mini", 301, 5.0)
    assert Completion("a", 1, 2) == Completion("a", 1, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.max_tokens = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Completion("a").text = "b"  # type: ignore[misc]


def test_stats_start_at_zero_and_never_share_their_error_list() -> None:
    first, second = SummaryStats(), SummaryStats()
    assert dataclasses.astuple(first) == (0, 0, 0, 0, 0, 0, 0, [])
    first.errors.append("timeout")
    first.calls += 1
    assert second.errors == []
    assert second.calls == 0


def test_a_misspelt_stat_is_an_error_not_a_new_attribute() -> None:
    stats = SummaryStats()
    with pytest.raises(AttributeError):
        stats.cache_hit = 1  # type: ignore[attr-defined]


def test_each_services_gets_its_own_stats_and_caches() -> None:
    first, second = Services(complete), Services(complete)
    assert first.caches == {}
    assert first.stats is not second.stats
    assert first.caches is not second.caches
    first.stats.calls += 1  # the summarizer counts into its request's stats
    assert second.stats.calls == 0
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.stats = SummaryStats()  # type: ignore[misc]


def test_replacing_the_stats_keeps_the_rest() -> None:
    # `curator simulate` runs each request with the same services and fresh stats.
    services = Services(complete, caches={"memory": object()})  # type: ignore[dict-item]
    services.stats.calls = 3
    own = dataclasses.replace(services, stats=SummaryStats())
    assert own.complete is services.complete
    assert own.caches is services.caches
    assert (own.stats.calls, services.stats.calls) == (0, 3)
