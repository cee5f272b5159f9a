"""Context windows from the upstream: `GET <base_url>/models`, at start and on every reload.

A local model (vLLM, llama.cpp, LM Studio, ...) has the window its server was started
with, which no table can know. OpenAI-compatible servers say it in their model list, each
in its own field (`WINDOW_FIELDS`). What is found here beats the built-in table; the
`models:` section still beats both (`ModelTable.lookup`).

Discovery runs in a background task, never on the request path: requests planned before it
answers use the table. It is bounded (`DISCOVERY_TIMEOUT_S`, `MAX_LIST_BYTES`,
`MAX_MODELS`) and a failure only keeps what the previous discovery found, logged at
info level (many upstreams, OpenAI's included, list models without windows, and some
need the client's own key, which the proxy does not have at start).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from policies.models import bare_name
from proxy.config.loader import UpstreamConfig
from proxy.upstream.client import UpstreamClient, UpstreamRequest
from proxy.upstream.hygiene import request_headers
from proxy.upstream.safe_text import loggable_url

log = logging.getLogger("curator.models")

DISCOVERY_TIMEOUT_S = 10.0
MAX_LIST_BYTES = 4 * 1024 * 1024
MAX_MODELS = 1024
"""An aggregator lists hundreds of models; more than this and the rest are ignored."""
WINDOW_FIELDS: tuple[tuple[str, ...], ...] = (
    ("max_model_len",),  # vLLM, SGLang: the server's configured limit
    ("loaded_context_length",),  # LM Studio (its /api/v0 list): what the model was loaded with
    ("context_length",),  # OpenRouter, Together, Fireworks, DeepInfra, LM Studio
    ("top_provider", "context_length"),  # OpenRouter, when the model's own is absent
    ("max_context_length",),  # Mistral, LM Studio
    ("context_window",),  # Groq
    ("meta", "n_ctx"),  # llama.cpp server
    ("meta", "n_ctx_train"),  # llama.cpp server, older builds: the training context
)
"""Where each server family states a model's window, most specific first."""


def windows_in(body: bytes) -> dict[str, int]:
    """Model id (lower-cased, also bare: `bare_name`) -> window, from a model list body."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    entries = parsed.get("data") if isinstance(parsed, dict) else parsed
    if not isinstance(entries, list):
        return {}
    found: dict[str, int] = {}
    for entry in entries[:MAX_MODELS]:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            continue
        window = _window_of(entry)
        if window is not None:
            found.setdefault(entry["id"].strip().lower(), window)
            found.setdefault(bare_name(entry["id"]), window)
    return found


def _window_of(entry: Mapping[str, Any]) -> int | None:
    for path in WINDOW_FIELDS:
        value: Any = entry
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


class UpstreamWindows:
    """What each upstream's model list said, replaced whole by every discovery."""

    __slots__ = ("_by_upstream", "_task")

    def __init__(self) -> None:
        self._by_upstream: dict[str, dict[str, int]] = {}
        self._task: asyncio.Task[None] | None = None

    def window(self, upstream: str, model: str) -> int | None:
        """The window `upstream` reported for `model`, None when it did not say."""
        found = self._by_upstream.get(upstream)
        if not found:
            return None
        return found.get(model.strip().lower()) or found.get(bare_name(model))

    def refresh(self, client: UpstreamClient, upstreams: Iterable[UpstreamConfig]) -> None:
        """Read every upstream's model list in the background (a running one is replaced)."""
        if self._task is not None:
            self._task.cancel()
        self._task = asyncio.get_running_loop().create_task(self.discover(client, upstreams))

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def discover(self, client: UpstreamClient, upstreams: Iterable[UpstreamConfig]) -> None:
        """Read every upstream's model list now; a failed one keeps what it had, and one with
        `discover_models: false` is never asked (and forgets what it had)."""
        configs = [u for u in upstreams if u.discover_models]
        lists = await asyncio.gather(*(_fetch(client, u) for u in configs))
        names = {u.name for u in configs}
        updated = {n: w for n, w in self._by_upstream.items() if n in names}
        for upstream, found in zip(configs, lists, strict=True):
            if found is not None:
                updated[upstream.name] = found
        self._by_upstream = updated


async def _fetch(client: UpstreamClient, upstream: UpstreamConfig) -> dict[str, int] | None:
    """The windows one upstream lists; None when it could not be asked."""
    url = upstream.api_base + "/models"
    accept = [(b"accept", b"application/json")]
    headers = request_headers(accept, upstream.authorization, upstream.kind)
    request = UpstreamRequest(
        "GET", url, headers, b"", upstream.connect_timeout_s, DISCOVERY_TIMEOUT_S
    )
    try:
        async with asyncio.timeout(DISCOVERY_TIMEOUT_S):
            body, status = await _read(client, request)
    except Exception as exc:  # discovery is best effort: the table still applies
        log.info("model windows: %s: not read (%s)", loggable_url(url), type(exc).__name__)
        return None
    if status != 200:
        log.info("model windows: %s answered %d", loggable_url(url), status)
        return None
    found = windows_in(body)
    log.info("model windows: %s lists %d model(s) with a window", loggable_url(url), len(found))
    return found


async def _read(client: UpstreamClient, request: UpstreamRequest) -> tuple[bytes, int]:
    response = await client.send(request)
    try:
        chunks: list[bytes] = []
        size = 0
        while chunk := await response.read():
            size += len(chunk)
            if size > MAX_LIST_BYTES:
                raise ValueError("model list too large")
            chunks.append(chunk)
        return b"".join(chunks), response.status
    finally:
        await response.aclose()
