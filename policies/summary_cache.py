"""Summary caching: the in-process LRU, stable cut points, span keys (protocol: summary_io).

Cut points and keys are what let the next turn find the summary the last one wrote.

A summarizer's `cache` setting names its cache: `memory` (the default, an LRU per
process) or a `redis://`, `rediss://` or `unix://` URL, which the proxy turns into a
shared cache so every replica reuses the summaries any of them wrote. Keys are hex
digests of the summarized span and the summarizer's settings; values are summary texts.

The protocol is async because a shared cache is a network round trip. Implementations
may raise on I/O errors: the summarizer counts them and carries on as on a miss.
"""

from __future__ import annotations

import asyncio
import bisect
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Sequence
from urllib.parse import urlsplit

import orjson

from policies.errors import ParamError
from policies.messages import Message
from policies.summary_io import SummaryCache, SummaryStats

log = logging.getLogger("curator.summarizer")

MEMORY = "memory"
SHARED_SCHEMES = ("redis", "rediss", "unix")
DEFAULT_ENTRIES = 1024
"""Summaries are a few KB each, so the default LRU holds a few MB."""
CACHE_TIMEOUT_S = 2.0
"""Longest wait for one cache operation: a slow cache must not stall every request."""


class MemoryCache:
    """An in-process LRU; meant for one event loop, so it needs no lock."""

    def __init__(self, max_entries: int = DEFAULT_ENTRIES) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
            raise ValueError(f"max_entries: must be an integer > 0, got {max_entries!r}")
        self._max_entries = max_entries
        self._data: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._data)

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        out: list[str | None] = []
        for key in keys:
            text = self._data.get(key)
            if text is not None:
                self._data.move_to_end(key)
            out.append(text)
        return out

    async def put(self, key: str, text: str) -> None:
        self._data[key] = text
        self._data.move_to_end(key)
        while len(self._data) > self._max_entries:
            self._data.popitem(last=False)


def cache_spec(field: str, value: object) -> str:
    """Validate a `cache` setting: "memory", or a redis URL (redis, rediss or unix)."""
    if not isinstance(value, str) or not value:
        found = f"{value!r} ({type(value).__name__})"
        raise ParamError(field, f'must be "memory" or a redis:// URL, got {found}')
    if value == MEMORY:
        return value
    # Messages never echo the URL itself: it may carry a password.
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - parsing the port is what validates it
    except ValueError as exc:
        raise ParamError(field, f"is not a valid URL: {exc}") from exc
    if parts.scheme not in SHARED_SCHEMES:
        schemes = ", ".join(f"{s}://" for s in SHARED_SCHEMES)
        found = f"scheme {parts.scheme!r}" if parts.scheme else "no scheme"
        raise ParamError(field, f'must be "memory" or a URL starting with {schemes}, got {found}')
    unix = parts.scheme == "unix"
    if not (parts.path if unix else parts.hostname):
        raise ParamError(field, f"the URL names no {'socket path' if unix else 'host'}")
    return value


def anchored_cuts(cumulative: Sequence[int], step: int) -> list[int]:
    """Where a span may end, in units: anchored steps, plus the end of all candidates.

    Anchor k is the first unit at which the cumulative size reaches a new multiple of
    `step`. Anchors depend only on the oldest units, so a growing conversation keeps its
    earlier cut points, and with them its cache keys.
    """
    points: list[int] = []
    target = step
    while cumulative and target <= cumulative[-1]:
        cut = bisect.bisect_left(cumulative, target) + 1
        points.append(cut)
        target = (cumulative[cut - 1] // step + 1) * step
    if cumulative and (not points or points[-1] != len(cumulative)):
        points.append(len(cumulative))
    return points


def span_keys(settings: bytes, messages: Sequence[Message], ends: Sequence[int]) -> list[str]:
    """The cache key of each span `messages[:end]`: a digest of `settings` and its messages.

    One running hash over per-message digests, so all the keys cost one pass.
    """
    running = hashlib.sha256(hashlib.sha256(settings).digest())
    keys: list[str] = []
    done = 0
    for end in ends:
        for message in messages[done:end]:
            running.update(_digest(message))
        done = max(done, end)
        keys.append(running.copy().hexdigest())
    return keys


def _digest(message: Message) -> bytes:
    try:
        data = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # not plain JSON (a library caller's objects): repr is stable too
        data = repr(message).encode("utf-8", "surrogatepass")
    return hashlib.sha256(data).digest()


async def lookup(
    cache: SummaryCache | None, keys: Sequence[str], *, timeout_s: float, stats: SummaryStats
) -> list[str | None]:
    """`cache.get_many(keys)`, with any failure counted and answered as all misses."""
    if cache is None:
        return [None] * len(keys)
    try:
        async with asyncio.timeout(min(timeout_s, CACHE_TIMEOUT_S)):
            found = await cache.get_many(keys)
        if len(found) != len(keys):
            raise ValueError(f"asked for {len(keys)} keys, got {len(found)} answers")
        return list(found)
    except Exception as exc:  # a broken cache is a miss, never a failed request
        stats.cache_errors += 1
        log.warning("summary cache lookup failed: %s: %s", type(exc).__name__, exc)
        return [None] * len(keys)


async def store(
    cache: SummaryCache | None, key: str, text: str, *, timeout_s: float, stats: SummaryStats
) -> None:
    """`cache.put(key, text)`, with any failure counted and logged."""
    if cache is None:
        return
    try:
        async with asyncio.timeout(min(timeout_s, CACHE_TIMEOUT_S)):
            await cache.put(key, text)
    except Exception as exc:  # the summary is still good for this request
        stats.cache_errors += 1
        log.warning("summary cache store failed: %s: %s", type(exc).__name__, exc)
