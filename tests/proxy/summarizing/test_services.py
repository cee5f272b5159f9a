"""summarize.py: the summary call through the upstream client, caches, per-request services."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import orjson
import pytest

from policies.chain import Chain
from policies.messages import SUMMARY_PREFIX
from policies.policy import Policy
from policies.summarizer import Summarizer
from policies.summary_cache import MemoryCache
from policies.summary_io import Completion, SummaryRequest
from proxy.config.loader import Config, Route, ServerConfig, UpstreamConfig
from proxy.errors import ProxyError
from proxy.summarizing.redis_cache import RedisSummaryCache
from proxy.summarizing.services import (
    SummaryCallError,
    build_complete,
    cache_specs,
    close_cache,
    new_cache,
    open_caches,
    output_limit_key,
    parse_reply,
    services_for,
    summarizers,
)
from proxy.upstream.client import UpstreamClient
from proxy.upstream.connect import open_client
from tests import factories as f
from tests.fakes.upstream import Behavior, FakeOpenAI, ToolCall

pytestmark = pytest.mark.anyio

REQUEST = SummaryRequest("cheap", "gpt-4o-mini", 200, 5.0)
PROMPT = [{"role": "system", "content": "Summarize."}, {"role": "user", "content": "<t>hi</t>"}]
CLIENT_AUTH = b"Bearer sk-client"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the upstream client, like the proxy, is asyncio-only


@pytest.fixture
def fake() -> FakeOpenAI:
    return FakeOpenAI()


@pytest.fixture
async def client(fake: FakeOpenAI) -> AsyncIterator[UpstreamClient]:
    async with open_client(httpx.ASGITransport(app=fake.app)) as upstream_client:
        yield upstream_client


def upstreams(**keys: str | None) -> Mapping[str, UpstreamConfig]:
    """`cheap` and `main` on the fake's origin, `elsewhere` on another host."""
    table = {
        "cheap": UpstreamConfig("cheap", "http://fake.test/v1", api_key=keys.get("cheap")),
        "main": UpstreamConfig("main", "http://fake.test/v1", api_key=keys.get("main")),
        "elsewhere": UpstreamConfig("elsewhere", "http://other.test/v1"),
    }
    return types.MappingProxyType(table)


async def test_complete_posts_a_non_streaming_chat_completion(
    fake: FakeOpenAI, client: UpstreamClient
) -> None:
    fake.queue(Behavior(reply="They fixed the bug."))
    complete = build_complete(client, upstreams())
    done = await complete(PROMPT, REQUEST)
    sent = fake.last
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.json() == {
        "model": "gpt-4o-mini",
        "messages": PROMPT,
        "max_tokens": 200,
        "stream": False,
    }
    assert sent.header("content-type") == "application/json"
    assert done.text == "They fixed the bug."
    assert done.prompt_tokens > 0
    assert done.completion_tokens == f.text_tokens("They fixed the bug.")
    assert fake.last.header("authorization") is None


async def test_the_upstreams_api_key_replaces_the_clients_authorization(
    fake: FakeOpenAI, client: UpstreamClient
) -> None:
    fake.api_key = "sk-summary"
    complete = build_complete(
        client, upstreams(cheap="sk-summary"), authorization=CLIENT_AUTH, authorization_for="main"
    )
    await complete(PROMPT, REQUEST)
    assert fake.last.header("authorization") == "Bearer sk-summary"


async def test_the_clients_authorization_goes_only_to_its_own_origin(
    fake: FakeOpenAI, client: UpstreamClient
) -> None:
    complete = build_complete(
        client, upstreams(), authorization=CLIENT_AUTH, authorization_for="main"
    )
    await complete(PROMPT, REQUEST)
    assert fake.last.header("authorization") == "Bearer sk-client"
    elsewhere = build_complete(
        client, upstreams(), authorization=CLIENT_AUTH, authorization_for="elsewhere"
    )
    await elsewhere(PROMPT, REQUEST)
    assert fake.last.header("authorization") is None


@pytest.mark.parametrize(
    ("behavior", "problem"),
    [
        (
            Behavior(status=500, body=b'{"error": {"message": "The server had an error"}}'),
            "upstream 'cheap' answered HTTP 500: The server had an error",
        ),
        (
            Behavior(status=503, body=b"<html>busy</html>"),
            "upstream 'cheap' answered HTTP 503: <html>busy</html>",
        ),
        (
            Behavior(tool_calls=(ToolCall("search", "{}", "call_1"),)),
            "upstream 'cheap' answered without a text message",
        ),
    ],
)
async def test_unusable_replies_raise(
    fake: FakeOpenAI, client: UpstreamClient, behavior: Behavior, problem: str
) -> None:
    fake.queue(behavior)
    with pytest.raises(SummaryCallError, match="^" + problem.replace("(", r"\(")):
        await build_complete(client, upstreams())(PROMPT, REQUEST)


async def test_a_wrong_key_is_reported_with_the_upstreams_status(
    fake: FakeOpenAI, client: UpstreamClient
) -> None:
    fake.api_key = "sk-right"
    complete = build_complete(client, upstreams(cheap="sk-wrong"))
    with pytest.raises(SummaryCallError, match="answered HTTP 401: Incorrect API key provided"):
        await complete(PROMPT, REQUEST)


async def test_an_unknown_upstream_is_an_error(client: UpstreamClient) -> None:
    request = dataclasses.replace(REQUEST, upstream="nope")
    with pytest.raises(SummaryCallError, match="no upstream named 'nope' is configured"):
        await build_complete(client, upstreams())(PROMPT, request)


async def test_a_gzipped_reply_is_read(fake: FakeOpenAI, client: UpstreamClient) -> None:
    fake.queue(Behavior(reply="Zipped summary.", gzip=True))
    done = await build_complete(client, upstreams())(PROMPT, REQUEST)
    assert done.text == "Zipped summary."


async def test_transport_errors_are_mapped_like_forwarding() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    async with open_client(httpx.MockTransport(refuse)) as refusing:
        with pytest.raises(ProxyError) as caught:
            await build_complete(refusing, upstreams())(PROMPT, REQUEST)
    assert caught.value.code == "upstream_unreachable"


async def test_an_oversized_reply_is_refused() -> None:
    def flood(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"x" * (5 * 1024 * 1024))

    async with open_client(httpx.MockTransport(flood)) as flooding:
        with pytest.raises(SummaryCallError, match="reply larger than"):
            await build_complete(flooding, upstreams())(PROMPT, REQUEST)


def test_parse_reply_reads_text_and_usage() -> None:
    body: dict[str, Any] = {
        "choices": [{"message": {"role": "assistant", "content": "S"}}],
        "usage": {"prompt_tokens": 900, "completion_tokens": 40},
    }
    assert parse_reply("u", 200, orjson.dumps(body)) == Completion("S", 900, 40)
    del body["usage"]
    assert parse_reply("u", 200, orjson.dumps(body)) == Completion("S", 0, 0)
    with pytest.raises(SummaryCallError, match="without a text message"):
        parse_reply("u", 200, b"not json")


def config(*policies: Policy) -> Config:
    return Config(
        source="<test>",
        server=ServerConfig(),
        upstreams=upstreams(),
        policies=types.MappingProxyType({p.name: p for p in policies}),
        routes=(Route("default", upstream="main", policy=policies[0].name),),
    )


def policy(name: str, *caches: str) -> Policy:
    chain = tuple(Summarizer(upstream="cheap", model="m", cache=cache) for cache in caches)
    return Policy(name, Chain(chain))


async def test_open_caches_builds_one_cache_per_setting() -> None:
    cfg = config(
        policy("a", "memory"), policy("b", "memory", "redis://127.0.0.1:1/0"), Policy("off")
    )
    assert [s.cache for s in summarizers(cfg.policies.values())] == [
        "memory",
        "memory",
        "redis://127.0.0.1:1/0",
    ]
    async with open_caches(cfg, memory_entries=8) as caches:
        assert set(caches) == {"memory", "redis://127.0.0.1:1/0"}
        assert isinstance(caches["memory"], MemoryCache)
        assert isinstance(caches["redis://127.0.0.1:1/0"], RedisSummaryCache)
        await caches["memory"].put("k", "v")
        assert await caches["memory"].get_many(["k"]) == ["v"]


def test_cache_specs_are_the_distinct_settings_in_order() -> None:
    cfg = config(policy("a", "redis://h/1", "memory"), policy("b", "memory", "redis://h/1"))
    assert cache_specs(cfg) == ["redis://h/1", "memory"]
    assert cache_specs(config(Policy("off"))) == []


async def test_new_cache_is_memory_or_redis_and_close_cache_closes_only_redis(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memory = new_cache("memory", memory_entries=2)
    assert isinstance(memory, MemoryCache)
    redis = new_cache("redis://127.0.0.1:1/0")
    assert isinstance(redis, RedisSummaryCache)
    closed: list[object] = []

    async def aclose(self: RedisSummaryCache) -> None:
        closed.append(self)
        raise ConnectionError("gone")  # shutting down: a failing close is not an error

    monkeypatch.setattr(RedisSummaryCache, "aclose", aclose)
    await close_cache(memory)
    await close_cache(redis)
    assert closed == [redis]


async def test_services_summarize_through_the_fake_upstream(
    fake: FakeOpenAI, client: UpstreamClient
) -> None:
    fake.queue(Behavior(reply="The user asked 30 questions."))
    summarizer = Summarizer(upstream="cheap", model="gpt-4o-mini", trigger_tokens=1000)
    cfg = config(Policy("agents", Chain((summarizer,))))
    async with open_caches(cfg) as caches:
        svc = services_for(client, cfg, caches, authorization=CLIENT_AUTH, route_upstream="main")
        body = {"model": "gpt-4o", "messages": []}
        messages: list[dict[str, Any]] = [f.system()]
        for i in range(30):
            messages += [f.user(f"question {i} " + f.long_text(20)), f.assistant(f"answer {i}")]
        result = await cfg.policies["agents"].acurate(messages, body, f.counter(), services=svc)
    assert result.messages[1]["content"].startswith(SUMMARY_PREFIX)
    assert result.messages[1]["content"].endswith("The user asked 30 questions.")
    assert svc.stats.calls == 1
    assert svc.stats.completion_tokens == f.text_tokens("The user asked 30 questions.")
    sent = fake.last.json()
    assert sent["model"] == "gpt-4o-mini"
    assert "question 0 " in sent["messages"][1]["content"]
    assert fake.last.header("authorization") == "Bearer sk-client"


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("gpt-4o-mini", "max_tokens"),
        ("llama-3.1-8b-instruct", "max_tokens"),
        ("o3-mini", "max_completion_tokens"),
        ("o4-mini-2025-04-16", "max_completion_tokens"),
        ("gpt-5-nano", "max_completion_tokens"),
        ("openai/gpt-5-mini", "max_completion_tokens"),
        ("ollama-o1x", "max_tokens"),
    ],
)
def test_reasoning_models_get_max_completion_tokens(model: str, key: str) -> None:
    assert output_limit_key(model) == key


async def test_a_reasoning_summarizer_is_sent_max_completion_tokens(
    fake: FakeOpenAI, client: UpstreamClient
) -> None:
    fake.queue(Behavior(reply="Done."))
    await build_complete(client, upstreams())(PROMPT, dataclasses.replace(REQUEST, model="o4-mini"))
    sent = fake.last.json()
    assert sent["max_completion_tokens"] == REQUEST.max_tokens
    assert "max_tokens" not in sent
