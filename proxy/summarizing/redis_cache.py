"""A summary cache in redis, shared by every replica: a summarizer's `cache: redis://...`.

Values are summary texts under `curator:summary:<key>`, expiring after `ttl_s` so that
summaries of conversations nobody continues do not pile up. Timeouts are short and
retries off: a slow or absent redis must cost a request at most a moment, and the
summarizer treats any error as a miss.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

PREFIX = "curator:summary:"
TTL_S = 7 * 24 * 3600
SOCKET_TIMEOUT_S = 1.0


class RedisSummaryCache:
    """`policies.summary_cache.SummaryCache` over a redis client."""

    def __init__(self, client: aioredis.Redis, *, prefix: str = PREFIX, ttl_s: int = TTL_S) -> None:
        if ttl_s < 1:
            raise ValueError(f"ttl_s: must be > 0, got {ttl_s}")
        self._client = client
        self._prefix = prefix
        self._ttl_s = ttl_s

    @classmethod
    def from_url(
        cls, url: str, *, ttl_s: int = TTL_S, timeout_s: float = SOCKET_TIMEOUT_S
    ) -> RedisSummaryCache:
        """A cache for `redis://`, `rediss://` or `unix://` URLs; connects on first use."""
        client = aioredis.Redis.from_url(
            url,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
        )
        return cls(client, ttl_s=ttl_s)

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        if not keys:
            return []
        values = await self._client.mget([self._prefix + key for key in keys])
        return [_text(value) for value in values]

    async def put(self, key: str, text: str) -> None:
        await self._client.set(self._prefix + key, text.encode("utf-8"), ex=self._ttl_s)

    async def aclose(self) -> None:
        await self._client.aclose()


def _text(value: object) -> str | None:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None
