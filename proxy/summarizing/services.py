"""The proxy's side of summarizing: the `complete` callable, the caches, per-request services.

`complete` sends a non-streaming chat completion to a named upstream through the same
upstream client, header hygiene and error mapping as forwarding. Authorization is the
upstream's `api_key`; an upstream without one gets the client's own Authorization, but
only when it has the same origin as the upstream the client's request is going to, so a
client's credential never travels to a host it was not meant for.

Caches live as long as the app: `open_caches` builds one per distinct `cache` setting
among the config's summarizers (an in-process LRU for `memory`, redis for URLs) and
closes them at shutdown. `services_for` bundles them with a request's `complete`.
"""

from __future__ import annotations

import re
import types
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager, suppress
from typing import Any
from urllib.parse import urlsplit

import orjson

from policies.messages import Message
from policies.policy import Policy
from policies.summarizer import Summarizer
from policies.summary_cache import DEFAULT_ENTRIES, MEMORY, MemoryCache
from policies.summary_io import Complete, Completion, Services, SummaryCache, SummaryRequest
from proxy.config.loader import Config, UpstreamConfig
from proxy.summarizing.redis_cache import RedisSummaryCache
from proxy.upstream.client import UpstreamClient, UpstreamRequest
from proxy.upstream.hygiene import request_headers
from proxy.upstream.inflate import InflateError, inflate

COMPLETIONS_SUFFIX = "/chat/completions"
"""Appended to the upstream's base URL (which ends in `/v1`) for a summary call."""
MAX_REPLY_BYTES = 4 * 1024 * 1024
"""A summary is a few KB; anything near this is not a summary (as read, and inflated)."""
ERROR_SNIPPET_CHARS = 200


class SummaryCallError(Exception):
    """The summary upstream could not be asked, or did not answer with a summary."""


def build_complete(
    client: UpstreamClient,
    upstreams: Mapping[str, UpstreamConfig],
    *,
    authorization: bytes | None = None,
    authorization_for: str | None = None,
) -> Complete:
    """`complete` for one request; `authorization` is the client's, meant for the upstream
    named `authorization_for` (see the module docstring)."""

    async def complete(messages: list[Message], request: SummaryRequest) -> Completion:
        upstream = upstreams.get(request.upstream)
        if upstream is None:
            raise SummaryCallError(f"no upstream named {request.upstream!r} is configured")
        sent = [(b"content-type", b"application/json"), (b"accept", b"application/json")]
        if authorization and _same_origin(upstream, upstreams.get(authorization_for or "")):
            sent.append((b"authorization", authorization))
        body = {
            "model": request.model,
            "messages": messages,
            output_limit_key(request.model): request.max_tokens,
            "stream": False,
        }
        outgoing = UpstreamRequest(
            method="POST",
            url=upstream.base_url + COMPLETIONS_SUFFIX,
            headers=request_headers(sent, upstream.authorization),
            body=orjson.dumps(body),
            connect_timeout_s=min(upstream.connect_timeout_s, request.timeout_s),
            read_timeout_s=request.timeout_s,
        )
        status, encoding, raw = await _exchange(client, outgoing)
        if encoding in (b"gzip", b"deflate"):
            try:  # never asked for, but a hostile upstream may send a gzip bomb
                raw = await inflate(raw, MAX_REPLY_BYTES)
            except InflateError as exc:
                raise SummaryCallError(f"upstream {request.upstream!r}: {exc}") from None
        return parse_reply(request.upstream, status, raw)

    return complete


REASONING_MODELS = re.compile(r"^(?:.*/)?(?:o\d|gpt-5)")
"""OpenAI's reasoning models reject `max_tokens` and take `max_completion_tokens`."""


def output_limit_key(model: str) -> str:
    """The request field that caps the summary's length for `model`: most servers know only
    `max_tokens`, while OpenAI's o-series and gpt-5 models accept only the newer name."""
    return "max_completion_tokens" if REASONING_MODELS.match(model.lower()) else "max_tokens"


def _same_origin(a: UpstreamConfig, b: UpstreamConfig | None) -> bool:
    if b is None:
        return False
    x, y = urlsplit(a.base_url), urlsplit(b.base_url)
    return (x.scheme, x.hostname, x.port) == (y.scheme, y.hostname, y.port)


async def _exchange(client: UpstreamClient, request: UpstreamRequest) -> tuple[int, bytes, bytes]:
    """Status, content coding and whole body; transport errors become `ProxyError`s."""
    chunks: list[bytes] = []
    size = 0
    response = await client.send(request)  # the client maps its transport errors
    try:
        while chunk := await response.read():
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                raise SummaryCallError(f"reply larger than {MAX_REPLY_BYTES} bytes")
            chunks.append(chunk)
    finally:
        with suppress(Exception):
            await response.aclose()
    coding = next((v for n, v in response.headers if n.lower() == b"content-encoding"), b"")
    return response.status, coding.strip().lower(), b"".join(chunks)


def parse_reply(upstream: str, status: int, raw: bytes) -> Completion:
    """The summary and usage from a chat.completion body; `SummaryCallError` otherwise."""
    try:
        data: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = None
    if status != 200:
        error = data.get("error") if isinstance(data, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        detail = message if isinstance(message, str) else raw.decode("utf-8", "replace")
        raise SummaryCallError(
            f"upstream {upstream!r} answered HTTP {status}: {detail[:ERROR_SNIPPET_CHARS]}"
        )
    try:
        text = data["choices"][0]["message"]["content"]
    except (TypeError, KeyError, IndexError):
        text = None
    if not isinstance(text, str):
        raise SummaryCallError(f"upstream {upstream!r} answered without a text message")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return Completion(text, _count(usage, "prompt_tokens"), _count(usage, "completion_tokens"))


def _count(usage: Mapping[str, Any], key: str) -> int:
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def summarizers(policies: Iterable[Policy]) -> list[Summarizer]:
    """Every summarizer in these policies' chains."""
    return [c for p in policies for c in p.chain.curators if isinstance(c, Summarizer)]


def cache_specs(config: Config) -> list[str]:
    """The distinct `cache` settings of the config's summarizers, in order."""
    return list(dict.fromkeys(s.cache for s in summarizers(config.policies.values())))


def new_cache(spec: str, *, memory_entries: int = DEFAULT_ENTRIES) -> SummaryCache:
    """The cache one `cache` setting names: an in-process LRU for `memory`, else redis at
    that URL (the caller closes it with `close_cache`)."""
    if spec == MEMORY:
        return MemoryCache(memory_entries)
    return RedisSummaryCache.from_url(spec)


async def close_cache(cache: SummaryCache) -> None:
    """Close a cache `new_cache` opened (a redis connection pool; memory needs nothing)."""
    if isinstance(cache, RedisSummaryCache):
        with suppress(Exception):  # shutting down: nothing left to do about it
            await cache.aclose()


@asynccontextmanager
async def open_caches(
    config: Config, *, memory_entries: int = DEFAULT_ENTRIES
) -> AsyncIterator[Mapping[str, SummaryCache]]:
    """The caches the config's summarizers name, closed on exit."""
    caches = {s: new_cache(s, memory_entries=memory_entries) for s in cache_specs(config)}
    try:
        yield types.MappingProxyType(caches)
    finally:
        for cache in caches.values():
            await close_cache(cache)


def services_for(
    client: UpstreamClient,
    config: Config,
    caches: Mapping[str, SummaryCache],
    *,
    authorization: bytes | None = None,
    route_upstream: str | None = None,
) -> Services:
    """A request's services: its `complete`, the shared caches, and fresh stats."""
    complete = build_complete(
        client, config.upstreams, authorization=authorization, authorization_for=route_upstream
    )
    return Services(complete=complete, caches=caches)
