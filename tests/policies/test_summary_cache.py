"""summary_cache: the in-process LRU, `cache:` validation, span keys, fail-safe access."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from policies.errors import ParamError
from policies.summary_cache import (
    MemoryCache,
    anchored_cuts,
    cache_spec,
    lookup,
    span_keys,
    store,
)
from policies.summary_io import SummaryStats
from tests.factories import assistant, user

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the summarizer's timeouts use asyncio


async def test_memory_cache_answers_each_key_in_order() -> None:
    cache = MemoryCache()
    await cache.put("a", "summary a")
    await cache.put("b", "summary b")
    assert await cache.get_many(["b", "x", "a"]) == ["summary b", None, "summary a"]
    await cache.put("a", "newer")
    assert await cache.get_many(["a"]) == ["newer"]
    assert len(cache) == 2


async def test_memory_cache_evicts_the_least_recently_used() -> None:
    cache = MemoryCache(max_entries=2)
    await cache.put("old", "1")
    await cache.put("mid", "2")
    assert await cache.get_many(["old"]) == ["1"]  # now "mid" is the least recently used
    await cache.put("new", "3")
    assert await cache.get_many(["old", "mid", "new"]) == ["1", None, "3"]
    assert len(cache) == 2


@pytest.mark.parametrize("entries", [0, -1, True, 2.5])
def test_memory_cache_size_must_be_a_positive_integer(entries: object) -> None:
    with pytest.raises(ValueError, match="max_entries: must be an integer > 0"):
        MemoryCache(entries)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "spec",
    ["memory", "redis://localhost:6379/0", "rediss://:pw@cache.internal/2", "unix:///run/r.sock"],
)
def test_cache_spec_accepts_memory_and_redis_urls(spec: str) -> None:
    assert cache_spec("cache", spec) == spec


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("", "must be \"memory\" or a redis:// URL, got '' (str)"),
        (3, 'must be "memory" or a redis:// URL, got 3 (int)'),
        ("Memory", "got no scheme"),
        ("http://cache:6379", "got scheme 'http'"),
        ("redis://", "the URL names no host"),
        ("unix://", "the URL names no socket path"),
        ("redis://cache:99999/0", "is not a valid URL: Port out of range"),
    ],
)
def test_cache_spec_rejects_anything_else(spec: object, problem: str) -> None:
    with pytest.raises(ParamError) as caught:
        cache_spec("cache", spec)
    assert caught.value.field == "cache"
    assert problem in caught.value.message


def test_cache_spec_problems_never_echo_a_password() -> None:
    with pytest.raises(ParamError) as caught:
        cache_spec("cache", "http://user:s3cret@cache:6379")
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize(
    ("cumulative", "step", "cuts"),
    [
        ([], 10, []),
        ([4, 8], 10, [2]),
        ([4, 10, 14, 25, 26], 10, [2, 4, 5]),
        ([30, 31, 45], 10, [1, 3]),
        ([5, 10, 15], 1, [1, 2, 3]),
    ],
)
def test_anchored_cuts_fall_at_each_new_multiple_of_the_step(
    cumulative: list[int], step: int, cuts: list[int]
) -> None:
    assert anchored_cuts(cumulative, step) == cuts


def test_anchored_cuts_stay_put_as_the_conversation_grows() -> None:
    sizes = [7, 3, 12, 5, 9, 30, 2, 8, 11, 6, 4]
    cumulative = [sum(sizes[: i + 1]) for i in range(len(sizes))]
    for n in range(2, len(sizes)):
        shorter, longer = anchored_cuts(cumulative[:n], 20), anchored_cuts(cumulative, 20)
        # Every anchor of the shorter history, all but its closing cut, survives growth.
        assert set(shorter[:-1]) <= set(longer)


SPAN = [user("one"), assistant("two"), user("three"), assistant("four")]


def test_span_keys_are_prefix_digests() -> None:
    both = span_keys(b"settings", SPAN, [2, 4])
    assert both == [span_keys(b"settings", SPAN[:2], [2])[0], span_keys(b"settings", SPAN, [4])[0]]
    assert both[0] != both[1]
    assert all(len(key) == 64 for key in both)


def test_span_keys_depend_on_settings_and_content_not_on_key_order() -> None:
    (key,) = span_keys(b"settings", SPAN, [4])
    assert span_keys(b"other settings", SPAN, [4]) != [key]
    assert span_keys(b"settings", [*SPAN[:3], assistant("FOUR")], [4]) != [key]
    reordered = [*SPAN[:3], {"content": "four", "role": "assistant"}]
    assert span_keys(b"settings", reordered, [4]) == [key]


class BrokenCache:
    """A cache whose backend is down; remembers what it was asked."""

    def __init__(self) -> None:
        self.asked: list[object] = []

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        self.asked.append(list(keys))
        raise ConnectionError("cache is down")

    async def put(self, key: str, text: str) -> None:
        self.asked.append((key, text))
        raise ConnectionError("cache is down")


class ShortCache(MemoryCache):
    """A cache that answers fewer values than it was asked for."""

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:  # noqa: ARG002
        return ["x"]


async def test_lookup_and_store_count_failures_as_misses() -> None:
    stats, broken = SummaryStats(), BrokenCache()
    assert await lookup(broken, ["a", "b"], timeout_s=1, stats=stats) == [None, None]
    await store(broken, "a", "text", timeout_s=1, stats=stats)
    assert broken.asked == [["a", "b"], ("a", "text")]
    assert await lookup(ShortCache(), ["a", "b"], timeout_s=1, stats=stats) == [None, None]
    assert stats.cache_errors == 3


async def test_lookup_and_store_without_a_cache_do_nothing() -> None:
    stats = SummaryStats()
    assert await lookup(None, ["a"], timeout_s=1, stats=stats) == [None]
    await store(None, "a", "text", timeout_s=1, stats=stats)
    assert stats == SummaryStats()


async def test_lookup_and_store_use_the_cache() -> None:
    stats, cache = SummaryStats(), MemoryCache()
    await store(cache, "k", "summary", timeout_s=1, stats=stats)
    assert await lookup(cache, ["x", "k"], timeout_s=1, stats=stats) == [None, "summary"]
    assert stats.cache_errors == 0
