"""Route selection (first match wins) and the x-curator-policy header."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.policy import Policy
from proxy.config.loader import Route, RouteMatch
from proxy.serving.routing import PolicyChoice, Router, choose_policy, select_route

CHAT = "/v1/chat/completions"

ROUTES = (
    Route("team", "a", "p", RouteMatch(path=CHAT, headers=(("x-team", "agents"),))),
    Route("gpt", "a", "p", RouteMatch(path="/v1/chat/*", model="gpt-4o*")),
    Route("embeddings", "b", "p", RouteMatch(path="/v1/embeddings")),
    Route("llama", "b", "p", RouteMatch(model="*llama*")),
    Route("default", "a", "p"),
)


@pytest.mark.parametrize(
    ("path", "model", "headers", "expected"),
    [
        (CHAT, "gpt-4o", {"x-team": "agents"}, "team"),
        (CHAT, "gpt-4o", {"X-Team": "agents"}, "team"),
        (CHAT, "gpt-4o", {"x-team": "other"}, "gpt"),
        (CHAT, "gpt-4o-mini", {}, "gpt"),
        (CHAT, "GPT-4O", {}, "default"),
        ("/v1/completions", "gpt-4o", {}, "default"),
        ("/v1/embeddings", "gpt-4o", {"x-team": "agents"}, "embeddings"),
        ("/v1/embeddings", None, {}, "embeddings"),
        (CHAT, "meta/llama-3.1-70b", {}, "llama"),
        ("/v1/models", None, {}, "default"),
    ],
)
def test_first_matching_route_wins(
    path: str, model: str | None, headers: dict[str, str], expected: str
) -> None:
    route = select_route(ROUTES, path, model, headers)
    assert route is not None
    assert route.name == expected


def test_no_route_matches() -> None:
    routes = ROUTES[:-1]
    assert select_route(routes, "/v1/models", None, {}) is None
    assert select_route((), CHAT, "gpt-4o", {}) is None


def test_every_header_condition_must_hold() -> None:
    both = RouteMatch(headers=(("x-team", "agent*"), ("x-env", "prod")))
    routes = (Route("both", "a", "p", both),)
    assert select_route(routes, CHAT, None, {"x-team": "agents", "X-ENV": "prod"}) is not None
    assert select_route(routes, CHAT, None, {"x-team": "agents"}) is None
    assert select_route(routes, CHAT, None, {"x-team": "ops", "x-env": "prod"}) is None


def test_header_values_are_case_sensitive_globs() -> None:
    routes = (Route("r", "a", "p", RouteMatch(headers=(("x-team", "Agents"),))),)
    assert select_route(routes, CHAT, None, {"x-team": "agents"}) is None


def test_model_glob_star_also_takes_requests_without_a_model() -> None:
    routes = (Route("any", "a", "p", RouteMatch(model="*")),)
    assert select_route(routes, "/v1/models", None, {}) == routes[0]


POLICIES = {"chat": Policy("chat"), "agents": Policy("agents"), "off": Policy("off")}
OPEN = Route("open", "a", "chat", allow_policy_header=True)
CLOSED = Route("closed", "a", "chat")


@pytest.mark.parametrize(
    ("route", "headers", "expected"),
    [
        (OPEN, {}, PolicyChoice("chat", POLICIES["chat"])),
        (OPEN, {"x-curator-policy": "off"}, PolicyChoice("off", POLICIES["off"], "applied", "off")),
        (
            OPEN,
            {"X-Curator-Policy": " agents "},
            PolicyChoice("agents", POLICIES["agents"], "applied", "agents"),
        ),
        (
            OPEN,
            {"x-curator-policy": "nope"},
            PolicyChoice("chat", POLICIES["chat"], "unknown", "nope"),
        ),
        (
            CLOSED,
            {"x-curator-policy": "off"},
            PolicyChoice("chat", POLICIES["chat"], "not_allowed", "off"),
        ),
        (CLOSED, {"x-other": "off"}, PolicyChoice("chat", POLICIES["chat"])),
    ],
)
def test_policy_header(route: Route, headers: dict[str, str], expected: PolicyChoice) -> None:
    assert choose_policy(route, headers, POLICIES) == expected
    assert Router((route,), POLICIES).policy(route, headers) == expected


paths = st.sampled_from([CHAT, "/v1/completions", "/v1/embeddings", "/v1/models", "/v1/chat/x"])
models = st.one_of(st.none(), st.sampled_from(["gpt-4o", "gpt-4o-mini", "llama-3", "x", ""]))


@given(st.lists(st.tuples(paths, models), max_size=40))
def test_the_router_routes_as_select_route_however_its_memo_fills(
    asked: list[tuple[str, str | None]],
) -> None:
    no_headers = tuple(r for r in ROUTES if not r.match.headers)
    for routes in (no_headers, no_headers[:-1]):  # with and without a catch-all
        router = Router(routes, POLICIES, capacity=3)  # small: starts over again and again
        for path, model in asked:
            assert router.route(path, model, {}) == select_route(routes, path, model, {})


def test_the_router_reads_headers_whenever_a_route_matches_on_them() -> None:
    router = Router(ROUTES, POLICIES)
    for _ in range(2):  # the second time would come from a memo, if there were one
        team = router.route(CHAT, "gpt-4o", {"x-team": "agents"})
        gpt = router.route(CHAT, "gpt-4o", {"x-team": "other"})
        assert (team and team.name, gpt and gpt.name) == ("team", "gpt")
