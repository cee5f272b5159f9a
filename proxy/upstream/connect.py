"""Opening the process's upstream client (see `proxy.upstream.client` for the interface)."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from proxy.upstream.client import UpstreamClient
from proxy.upstream.h1_client import H1Client
from proxy.upstream.httpx_client import HttpxClient


@asynccontextmanager
async def open_client(
    transport: httpx.AsyncBaseTransport | None = None,
) -> AsyncIterator[UpstreamClient]:
    """The process's upstream client: `H1Client`, or httpx over `transport` when given."""
    if transport is not None:
        async with transport:
            yield HttpxClient(transport)
        return
    # For what H1Client hands over (URLs not ASCII): the system's CA store, as H1Client
    # uses (httpx would use certifi's).
    fallback = httpx.AsyncHTTPTransport(trust_env=False, verify=ssl.create_default_context())
    production = H1Client(HttpxClient(fallback))
    async with fallback:
        try:
            yield production
        finally:
            production.close()
