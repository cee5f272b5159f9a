"""simulate_model.py: the types `curator simulate` shares between its run and its report.
Their one piece of logic is `SimulatedRequest.curated`, what the model would see; the
rest is what `Options` assumes when a flag is not given."""

from __future__ import annotations

from typing import Any

from policies.chain import CurationResult
from policies.policy import Budget
from policies.prefix_cache import DEFAULT_CACHED_PRICE
from proxy.cli.simulate_input import Request
from proxy.cli.simulate_model import Options, SimulatedRequest, StoreQuery
from tests.factories import assistant, system, user

BUDGET = Budget(context_window=1000, reserve_output=100, tools=0, messages=880)
HISTORY = [system(), user("first"), assistant("reply"), user("last")]


def outcome(**kw: Any) -> SimulatedRequest:
    request = Request(1, {"model": "gpt-4o", "messages": HISTORY})
    return SimulatedRequest(request, "r", "p", BUDGET, 100, **kw)


def test_curated_is_what_the_chain_kept() -> None:
    kept = [HISTORY[0], HISTORY[3]]
    result = CurationResult(kept, (), 100, 40)
    assert outcome(result=result).curated is kept


def test_curated_is_the_request_itself_when_nothing_was_curated() -> None:
    for uncurated in (outcome(rejected="400 too long"), outcome(skipped="invalid_json"), outcome()):
        assert uncurated.curated is uncurated.request.messages
        assert uncurated.curated == HISTORY


def test_a_chain_that_kept_nothing_is_not_mistaken_for_no_curation() -> None:
    emptied = outcome(result=CurationResult([], (), 100, 3))
    assert emptied.curated == []


def test_options_left_out_mean_no_model_calls_and_the_text_report() -> None:
    options = Options(input="-")
    assert options.allow_calls is False  # a summarizer's calls cost money: only when asked
    assert (options.route, options.policy, options.model) == (None, None, None)
    assert options.cached_price == DEFAULT_CACHED_PRICE
    assert (options.diff, options.json, options.store) == (False, False, None)
    query = StoreQuery("2026-01-01")
    assert (query.config, query.until, query.path, query.sink, query.conversation) == (
        None,
        None,
        None,
        None,
        None,
    )
