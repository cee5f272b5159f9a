"""Upstream windows: each server family's model-list field, and discovery that never fails."""

from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest

from proxy.config.loader import UpstreamConfig
from proxy.upstream.httpx_client import HttpxClient
from proxy.upstream.models import UpstreamWindows, windows_in


def listing(*entries: dict[str, object]) -> bytes:
    return orjson.dumps({"object": "list", "data": list(entries)})


@pytest.mark.parametrize(
    ("entry", "window"),
    [
        ({"id": "m", "max_model_len": 8192}, 8192),  # vLLM
        ({"id": "m", "context_length": 32768}, 32768),  # OpenRouter, Together
        ({"id": "m", "top_provider": {"context_length": 65536}}, 65536),  # OpenRouter
        ({"id": "m", "max_context_length": 4096}, 4096),  # Mistral, LM Studio
        ({"id": "m", "context_window": 131072}, 131072),  # Groq
        ({"id": "m", "meta": {"n_ctx_train": 16384}}, 16384),  # llama.cpp
        ({"id": "m", "max_model_len": 8192, "context_length": 99}, 8192),  # most specific
    ],
)
def test_each_servers_field_is_read(entry: dict[str, object], window: int) -> None:
    assert windows_in(listing(entry))["m"] == window


def test_ids_are_kept_lower_case_and_bare() -> None:
    found = windows_in(listing({"id": "Org/Qwen3-8B", "max_model_len": 40960}))
    assert found == {"org/qwen3-8b": 40960, "qwen3-8b": 40960}


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"data": "x"}',
        listing({"id": "m"}),  # OpenAI: no window at all
        listing({"id": "m", "max_model_len": "8192"}, {"id": 3, "max_model_len": 1}),
        listing({"id": "m", "max_model_len": True}, {"id": "n", "context_length": -1}),
    ],
)
def test_lists_without_a_usable_window_give_nothing(body: bytes) -> None:
    assert windows_in(body) == {}


def upstream(name: str) -> UpstreamConfig:
    return UpstreamConfig(name, f"http://{name}.test/v1", api_key="sk-up")


def test_discovery_reads_each_upstream_and_tolerates_failures() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.host == "vllm.test":
            return httpx.Response(200, content=listing({"id": "llama", "max_model_len": 8192}))
        if request.url.host == "down.test":
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(401, content=b'{"error": {}}')

    async def run() -> UpstreamWindows:
        windows = UpstreamWindows()
        client = HttpxClient(httpx.MockTransport(handler))
        configs = [upstream("vllm"), upstream("down"), upstream("keyed")]
        await windows.discover(client, configs)
        return windows

    windows = asyncio.run(run())
    assert windows.window("vllm", "llama") == 8192
    assert windows.window("vllm", "meta/LLAMA") == 8192
    assert windows.window("down", "llama") is None
    assert windows.window("keyed", "llama") is None
    assert {r.url.path for r in seen} == {"/v1/models"}
    assert all(r.headers["authorization"] == "Bearer sk-up" for r in seen)


def test_a_failed_discovery_keeps_what_the_last_one_found() -> None:
    answers = [httpx.Response(200, content=listing({"id": "m", "max_model_len": 4096}))]

    def handler(request: httpx.Request) -> httpx.Response:
        if answers:
            return answers.pop()
        raise httpx.ConnectError("refused", request=request)

    async def run() -> UpstreamWindows:
        windows = UpstreamWindows()
        client = HttpxClient(httpx.MockTransport(handler))
        await windows.discover(client, [upstream("a")])
        await windows.discover(client, [upstream("a")])
        return windows

    assert asyncio.run(run()).window("a", "m") == 4096


def test_an_upstream_with_discovery_off_is_never_asked_and_forgets() -> None:
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.host)
        return httpx.Response(200, content=listing({"id": "m", "max_model_len": 4096}))

    quiet = UpstreamConfig("b", "http://b.test/v1", discover_models=False)

    async def run() -> UpstreamWindows:
        windows = UpstreamWindows()
        client = HttpxClient(httpx.MockTransport(handler))
        await windows.discover(client, [upstream("a"), upstream("b")])
        assert windows.window("b", "m") == 4096
        await windows.discover(client, [upstream("a"), quiet])  # a reload
        return windows

    windows = asyncio.run(run())
    assert asked == ["a.test", "b.test", "a.test"]
    assert windows.window("a", "m") == 4096
    assert windows.window("b", "m") is None
