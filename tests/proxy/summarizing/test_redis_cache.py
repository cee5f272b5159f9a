"""summary_cache_redis.py against a real redis-server on a random loopback port."""

from __future__ import annotations

import dataclasses
import shutil
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from policies.messages import Message
from policies.summarizer import Summarizer
from policies.summary_io import Completion, Services, SummaryRequest
from policies.summary_prompt import summary_message
from proxy.summarizing.redis_cache import PREFIX, RedisSummaryCache
from tests import factories as f

pytestmark = pytest.mark.anyio

REDIS = shutil.which("redis-server")
START_TIMEOUT_S = 20.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if REDIS is None:
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    port = _free_port()
    folder: Path = tmp_path_factory.mktemp("redis")
    server = subprocess.Popen(
        [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until_up(port, server)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.terminate()
        server.wait(timeout=START_TIMEOUT_S)


def _wait_until_up(port: int, server: subprocess.Popen[bytes]) -> None:
    probe = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=0.5)
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while True:
            try:
                probe.ping()
                return
            except redis.ConnectionError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server did not start on port {port}") from None
                time.sleep(0.05)
    finally:
        probe.close()


@pytest.fixture
async def cache(redis_url: str) -> AsyncIterator[RedisSummaryCache]:
    shared = RedisSummaryCache.from_url(redis_url)
    yield shared
    await shared.aclose()


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(redis_url)
    await client.flushdb()
    yield client
    await client.aclose()


async def test_put_then_get_many_round_trips_unicode(
    cache: RedisSummaryCache, raw: aioredis.Redis
) -> None:
    await cache.put("k1", "Résumé: 数据 🚀")
    assert await cache.get_many(["k1", "missing"]) == ["Résumé: 数据 🚀", None]
    assert await cache.get_many([]) == []
    assert await raw.get(PREFIX + "k1") == "Résumé: 数据 🚀".encode()


async def test_entries_expire_after_ttl_s(redis_url: str, raw: aioredis.Redis) -> None:
    short = RedisSummaryCache.from_url(redis_url, ttl_s=60)
    await short.put("k2", "text")
    await short.aclose()
    assert 0 < await raw.ttl(PREFIX + "k2") <= 60


def test_ttl_must_be_positive(redis_url: str) -> None:
    with pytest.raises(ValueError, match="ttl_s: must be > 0"):
        RedisSummaryCache(aioredis.Redis.from_url(redis_url), ttl_s=0)


async def test_an_unreachable_redis_raises_for_the_summarizer_to_count() -> None:
    down = RedisSummaryCache.from_url(f"redis://127.0.0.1:{_free_port()}/0")
    with pytest.raises(redis.ConnectionError):
        await down.get_many(["k"])
    await down.aclose()


class Recording:
    """A `complete` callable that answers with a fixed summary and counts its calls."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.calls = 0

    async def __call__(self, messages: list[Message], request: SummaryRequest) -> Completion:
        assert request.upstream == "cheap"
        assert messages[0]["role"] == "system"
        self.calls += 1
        return Completion(self.reply, 500, 10)


def conversation() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [f.system()]
    for i in range(30):
        messages += [f.user(f"question {i} " + f.long_text(20)), f.assistant(f"answer {i}")]
    return messages


async def test_replicas_share_summaries_through_redis(redis_url: str, raw: aioredis.Redis) -> None:
    summarizer = Summarizer(upstream="cheap", model="m", trigger_tokens=1000, cache=redis_url)
    results = []
    for reply in ("written by replica one", "written by replica two"):
        replica = RedisSummaryCache.from_url(redis_url)
        complete = Recording(reply)
        svc = Services(complete=complete, caches={redis_url: replica})
        ctx = dataclasses.replace(f.ctx(), services=svc)
        results.append((await summarizer.acurate(conversation(), ctx), complete, svc))
        await replica.aclose()
    (first, one, _), (second, two, svc) = results
    assert (one.calls, two.calls) == (1, 0)
    assert svc.stats.cache_hits == 1
    assert second.messages == first.messages
    assert second.messages[1] == summary_message("written by replica one")
    assert len(await raw.keys(PREFIX + "*")) == 1


async def test_a_dead_redis_does_not_stop_the_summary() -> None:
    url = f"redis://127.0.0.1:{_free_port()}/0"
    summarizer = Summarizer(upstream="cheap", model="m", trigger_tokens=1000, cache=url)
    down = RedisSummaryCache.from_url(url)
    svc = Services(complete=Recording("still summarized"), caches={url: down})
    out = await summarizer.acurate(conversation(), dataclasses.replace(f.ctx(), services=svc))
    await down.aclose()
    assert out.messages[1] == summary_message("still summarized")
    assert svc.stats.cache_errors == 2
