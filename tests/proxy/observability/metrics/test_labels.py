"""The label values metrics may use: route, policy and curator names drawn from the config
(anything else `other`, a missing one `none`), and the fixed reason sets."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.loader import load_preset
from proxy.config.loader import Config, ServerConfig, default_config
from proxy.config.routes import Route
from proxy.curation.plan import CURATED_EMPTY, WOULD_REJECT
from proxy.observability.metrics.labels import (
    INCOMPLETE_REASONS,
    KNOWN_SKIPS,
    NONE,
    OTHER,
    REJECT_REASONS,
    Labels,
    labels_for,
)
from proxy.protocols.chat import CHAT as CHAT_API
from proxy.protocols.responses.protocol import RESPONSES
from proxy.serving.conn_limits import request_header_too_large, request_timeout
from proxy.serving.conn_limits import too_many_connections as too_many

CODING = ("system_preservation", "turn_masking", "token_budget", "tool_pair_coherence")
CHAT = ("system_preservation", "history_retention", "turn_masking", "token_budget")


def config(policies: dict[str, str], routes: tuple[tuple[str, str], ...]) -> Config:
    """A config in code: policy name -> preset, routes as (name, policy)."""
    return Config(
        source="<code>",
        server=ServerConfig(),
        upstreams={},
        policies={name: load_preset(preset) for name, preset in policies.items()},
        routes=tuple(Route(name, upstream="openai", policy=policy) for name, policy in routes),
    )


@pytest.fixture(scope="module")
def labels() -> Labels:
    return labels_for(
        config(
            {"coding": "coding-agent", "talk": "chat", "off": "passthrough"},
            (("agents", "coding"), ("chat", "talk"), ("default", "off")),
        )
    )


# -- the bounded sets ---------------------------------------------------------------------


def test_labels_for_reads_route_and_policy_names(labels: Labels) -> None:
    assert labels.routes == frozenset({"agents", "chat", "default"})
    assert labels.policies == frozenset({"coding", "talk", "off"})


def test_curators_are_every_policys_curators_once(labels: Labels) -> None:
    assert labels.curators == frozenset(CODING) | frozenset(CHAT)
    assert len(labels.curators) == 5  # shared names counted once; passthrough has none


def test_a_policy_no_route_uses_still_names_a_label() -> None:
    labels = labels_for(config({"coding": "coding-agent", "spare": "chat"}, (("a", "coding"),)))
    assert labels.policy("spare") == "spare"
    assert labels.curator("history_retention") == "history_retention"


def test_an_empty_config_allows_no_name() -> None:
    labels = labels_for(config({}, ()))
    assert labels == Labels(frozenset(), frozenset(), frozenset())
    assert (labels.route("default"), labels.policy("default")) == (OTHER, OTHER)
    assert labels.curator("token_budget") == OTHER


def test_the_built_in_defaults() -> None:
    labels = labels_for(default_config(environ={}))
    assert labels.routes == labels.policies == frozenset({"default"})
    assert "token_budget" in labels.curators
    assert "dedupe" not in labels.curators  # the coding-agent preset's, not the default's


def test_labels_are_immutable(labels: Labels) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        labels.routes = frozenset({"x"})  # type: ignore[misc]
    assert isinstance(labels.routes, frozenset)
    assert hash(labels) == hash(dataclasses.replace(labels))


# -- bounding a value ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("agents", "agents"),
        ("default", "default"),
        (None, NONE),
        ("Agents", OTHER),
        ("agents ", OTHER),
        ("", OTHER),
        ("coding", OTHER),  # a policy's name is no route's
        ("a" * 10_000, OTHER),
    ],
)
def test_route(labels: Labels, value: str | None, expected: str) -> None:
    assert labels.route(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("coding", "coding"), ("off", "off"), (None, NONE), ("agents", OTHER), ("Coding", OTHER)],
)
def test_policy(labels: Labels, value: str | None, expected: str) -> None:
    assert labels.policy(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("turn_masking", "turn_masking"),
        ("history_retention", "history_retention"),
        ("dedupe", OTHER),  # no configured policy runs it
        ("my_plugin.curator", OTHER),
        ("", OTHER),
    ],
)
def test_curator(labels: Labels, value: str, expected: str) -> None:
    assert labels.curator(value) == expected


def test_the_sentinels_are_the_documented_words() -> None:
    assert (NONE, OTHER) == ("none", "other")


def test_a_configured_name_equal_to_a_sentinel_is_kept_as_it_is() -> None:
    """A route named `none` reads as a missing route, `other` as an unknown one: the
    config's names are not checked against the sentinels."""
    labels = labels_for(config({"p": "passthrough"}, (("none", "p"), ("other", "p"))))
    assert labels.route("none") == labels.route(None) == NONE
    assert labels.route("other") == labels.route("unknown") == OTHER


# -- the fixed sets -----------------------------------------------------------------------


def test_the_connection_guards_answers_are_rejection_reasons() -> None:
    codes = {request_header_too_large(1).code, request_timeout(1.0).code, too_many().code}
    assert codes == {"request_header_too_large", "request_timeout", "too_many_connections"}
    assert codes <= set(REJECT_REASONS)


def test_rejection_reasons_are_distinct_and_closed() -> None:
    assert len(set(REJECT_REASONS)) == len(REJECT_REASONS) == 8
    assert {"invalid_proxy_key", "proxy_overloaded", "connection_evicted"} <= set(REJECT_REASONS)


def test_the_curation_plans_skip_reasons_are_known() -> None:
    assert {WOULD_REJECT, CURATED_EMPTY, "curator_error", "invalid_json"} <= KNOWN_SKIPS
    assert {"no_messages", "bad_messages", "not_an_object"} <= KNOWN_SKIPS
    # Each protocol's own reasons (the Responses API's were all `other` before).
    assert CHAT_API.skip_reasons | RESPONSES.skip_reasons <= KNOWN_SKIPS
    assert {"string_input", "server_state", "unpaired_output"} <= KNOWN_SKIPS


def test_incomplete_reasons_cover_the_two_that_are_no_upstream_code() -> None:
    assert {"client_disconnect", "shutdown"} <= INCOMPLETE_REASONS
    assert OTHER not in INCOMPLETE_REASONS
    assert NONE not in KNOWN_SKIPS


# -- properties ---------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=50))
def test_any_input_yields_at_most_the_allowed_names_plus_two(
    values: list[str | None],
) -> None:
    labels = Labels(frozenset({"agents", "chat"}), frozenset({"coding"}), frozenset({"dedupe"}))
    routes = {labels.route(v) for v in values}
    policies = {labels.policy(v) for v in values}
    assert routes <= {"agents", "chat", NONE, OTHER}
    assert policies <= {"coding", NONE, OTHER}
    for v in values:
        assert (labels.route(v) == v) == (v in labels.routes)
        if v is not None:
            assert labels.curator(v) == (v if v == "dedupe" else OTHER)
