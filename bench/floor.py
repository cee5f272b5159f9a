"""The raw floor: the least a Python reverse proxy can do, to measure the proxy against.

Starlette plus one shared aiohttp ClientSession: forward the method, path and body bytes,
return the upstream's status and body. SSE responses are relayed chunk by chunk, the rest
is read whole; `/sse/` and `/trickle/` paths go to the stream upstream. No parsing, no
header hygiene, no curation: anything the real proxy costs beyond this is its overhead.

Run: `python -m bench.floor --port 18081 --upstream http://127.0.0.1:18090`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aiohttp
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

STREAM_PREFIXES = ("/sse/", "/trickle/")


def create_app(upstream: str, stream_upstream: str) -> Starlette:
    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[dict[str, aiohttp.ClientSession]]:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as s:
            yield {"session": s}

    async def forward(request: Request) -> Response:
        session: aiohttp.ClientSession = request.state.session
        body = await request.body()
        content_type = request.headers.get("content-type", "application/json")
        path = request.url.path
        origin = stream_upstream if path.startswith(STREAM_PREFIXES) else upstream
        resp = await session.request(
            request.method, origin + path, data=body, headers={"content-type": content_type}
        )
        media = resp.headers.get("content-type", "")
        if not media.startswith("text/event-stream"):
            async with resp:
                return Response(await resp.read(), resp.status, media_type=media)

        async def relay() -> AsyncIterator[bytes]:
            async with resp:
                async for chunk in resp.content.iter_any():
                    yield chunk

        return StreamingResponse(relay(), resp.status, media_type=media)

    methods = ["GET", "POST"]
    return Starlette(routes=[Route("/{path:path}", forward, methods=methods)], lifespan=lifespan)


def app_from_env() -> Starlette:
    """uvicorn factory for `--workers N` (workers rebuild the app from the environment)."""
    return create_app(os.environ["FLOOR_UPSTREAM"], os.environ["FLOOR_STREAM_UPSTREAM"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="origin, e.g. http://127.0.0.1:18090")
    parser.add_argument("--stream-upstream", help="origin for /sse/ and /trickle/ paths")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    os.environ["FLOOR_UPSTREAM"] = args.upstream.rstrip("/")
    os.environ["FLOOR_STREAM_UPSTREAM"] = (args.stream_upstream or args.upstream).rstrip("/")
    uvicorn.run(
        "bench.floor:app_from_env",
        factory=True,
        host=args.host,
        port=args.port,
        loop="uvloop",
        http="httptools",
        workers=args.workers,
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
