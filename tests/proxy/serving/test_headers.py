"""serving/headers.py: the `x-curator-*` response headers (route, mode, policy, ignored policy
header, token counts and the per-curator action summary)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.base import Action
from policies.chain import CurationResult
from policies.policy import Policy
from proxy.config.loader import Route
from proxy.config.routes import Mode
from proxy.serving.headers import (
    MODE_HEADER,
    actions_header,
    ascii_bytes,
    curated_headers,
    policy_headers,
)
from proxy.serving.routing import HeaderStatus, PolicyChoice
from tests import factories as f

ROUTE = Route("agents", "openai", "coding")
CHOICE = PolicyChoice("coding", Policy("coding"))


def act(curator: str, *indexes: int) -> Action:
    return Action(curator, "drop", indexes, 10 * len(indexes), "test")


def result(before: int, after: int, *actions: Action) -> CurationResult:
    return CurationResult([f.user("hi")], actions, before, after)


# -- actions -----------------------------------------------------------------------------
def test_no_actions_is_an_empty_summary() -> None:
    assert actions_header([]) == ""


def test_actions_count_each_curators_distinct_messages_in_chain_order() -> None:
    actions = [
        act("dedupe", 3, 4),
        act("truncate", 7),
        act("dedupe", 4, 5),  # 4 again: counted once
        act("drop_old", 1, 2, 3),
        act("truncate", 7),
    ]
    assert actions_header(actions) == "dedupe=3,truncate=1,drop_old=3"


def test_an_action_touching_no_message_still_names_its_curator() -> None:
    assert actions_header([act("repair")]) == "repair=0"


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["dedupe", "truncate", "drop_old"]),
            st.lists(st.integers(0, 9), max_size=5),
        ),
        max_size=8,
    )
)
def test_actions_summary_counts_distinct_indexes_whatever_repeats(
    steps: list[tuple[str, list[int]]],
) -> None:
    actions = [act(name, *indexes) for name, indexes in steps]
    summary = actions_header(actions)
    order = list(dict.fromkeys(name for name, _ in steps))
    counts = {name: len({i for n, found in steps if n == name for i in found}) for name in order}
    assert summary == ",".join(f"{name}={counts[name]}" for name in order)
    assert actions_header(actions + actions[::-1]) == summary


def test_ascii_bytes_replaces_what_is_not_ascii() -> None:
    assert ascii_bytes("plain-name_1") == b"plain-name_1"
    assert ascii_bytes("caf\u00e9 \U0001f600") == b"caf? ?"
    assert ascii_bytes("") == b""


# -- route and policy --------------------------------------------------------------------
def test_an_enforcing_route_says_route_and_policy_only() -> None:
    assert policy_headers(ROUTE, CHOICE) == [
        (b"x-curator-route", b"agents"),
        (b"x-curator-policy", b"coding"),
    ]


@pytest.mark.parametrize("mode", ["shadow", "off"])
def test_another_mode_is_said_between_route_and_policy(mode: Mode) -> None:
    route = Route("agents", "openai", "coding", mode=mode)
    assert MODE_HEADER == b"x-curator-mode"
    assert policy_headers(route, CHOICE) == [
        (b"x-curator-route", b"agents"),
        (b"x-curator-mode", mode.encode()),
        (b"x-curator-policy", b"coding"),
    ]


@pytest.mark.parametrize(
    ("status", "ignored"),
    [("absent", None), ("applied", None), ("unknown", b"unknown"), ("not_allowed", b"not_allowed")],
)
def test_a_policy_header_the_client_cannot_have_is_said_to_be_ignored(
    status: HeaderStatus, ignored: bytes | None
) -> None:
    choice = PolicyChoice("coding", Policy("coding"), status, "other")
    tail = [(b"x-curator-policy-ignored", ignored)] if ignored is not None else []
    assert policy_headers(ROUTE, choice) == [
        (b"x-curator-route", b"agents"),
        (b"x-curator-policy", b"coding"),
        *tail,
    ]


def test_names_from_config_are_sent_as_ascii() -> None:
    route = Route("\u00e9quipe", "openai", "r\u00e9sum\u00e9")
    choice = PolicyChoice("r\u00e9sum\u00e9", Policy("r\u00e9sum\u00e9"))
    assert policy_headers(route, choice) == [
        (b"x-curator-route", b"?quipe"),
        (b"x-curator-policy", b"r?sum?"),
    ]


# -- curated requests --------------------------------------------------------------------
def test_a_curated_request_adds_counts_and_actions() -> None:
    done = result(12_345, 6_789, act("dedupe", 1, 2), act("truncate", 5))
    assert curated_headers(ROUTE, CHOICE, done) == (
        (b"x-curator-route", b"agents"),
        (b"x-curator-policy", b"coding"),
        (b"x-curator-tokens-before", b"12345"),
        (b"x-curator-tokens-after", b"6789"),
        (b"x-curator-actions", b"dedupe=2,truncate=1"),
    )


def test_an_untouched_request_has_no_actions_header() -> None:
    assert curated_headers(ROUTE, CHOICE, result(0, 0)) == (
        (b"x-curator-route", b"agents"),
        (b"x-curator-policy", b"coding"),
        (b"x-curator-tokens-before", b"0"),
        (b"x-curator-tokens-after", b"0"),
    )


def test_curated_headers_keep_mode_and_ignored_policy() -> None:
    route = Route("agents", "openai", "coding", mode="shadow")
    choice = PolicyChoice("coding", Policy("coding"), "unknown", "nope")
    headers = curated_headers(route, choice, result(10, 7, act("caf\u00e9", 0)))
    assert headers == (
        (b"x-curator-route", b"agents"),
        (b"x-curator-mode", b"shadow"),
        (b"x-curator-policy", b"coding"),
        (b"x-curator-policy-ignored", b"unknown"),
        (b"x-curator-tokens-before", b"10"),
        (b"x-curator-tokens-after", b"7"),
        (b"x-curator-actions", b"caf?=1"),
    )
