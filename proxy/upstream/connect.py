"""Opening the process's upstream client (see `proxy.upstream.client` for the interface)."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from proxy.upstream.aiohttp_client import AiohttpClient, aiohttp_session
from proxy.upstream.client import UpstreamClient
from proxy.upstream.httpx_client import HttpxClient


@asynccontextmanager
async def open_client(
    transport: httpx.AsyncBaseTransport | None = None,
) -> AsyncIterator[UpstreamClient]:
    """The process's upstream client: aiohttp, or httpx over `transport` when given."""
    import httpx

    if transport is not None:
        async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
            yield HttpxClient(client)
        return
    # The system's CA store, as aiohttp uses (httpx would use certifi's).
    verbatim = httpx.AsyncClient(trust_env=False, verify=ssl.create_default_context())
    async with aiohttp_session() as session, verbatim:
        yield AiohttpClient(session, HttpxClient(verbatim))
