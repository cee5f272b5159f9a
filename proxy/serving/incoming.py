"""Reading what a client sent: the body (bounded), header lookups, the body's `model`.

Plain functions over raw ASGI messages and header pairs: the proxy endpoint reads requests
without Starlette's Request, and these run on every request, so they stay small.
"""

from __future__ import annotations

import orjson

from proxy.errors import request_too_large
from proxy.types import Headers, Receive


class ClientGone(Exception):
    """The client disconnected while its request body was being read."""


async def read_body(receive: Receive, limit: int) -> bytes:
    """The whole request body; `request_too_large` past `limit` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise request_too_large(limit)
        if not message.get("more_body", False):
            return b"".join((*chunks, chunk)) if chunks else chunk
        chunks.append(chunk)


def client_credential(raw: Headers) -> str | None:
    """The client's Authorization (or Azure's api-key, Anthropic's x-api-key) value; only its
    hash is ever kept."""
    found = {n: v for n, v in raw if n in (b"authorization", b"api-key", b"x-api-key")}
    value = found.get(b"authorization") or found.get(b"api-key") or found.get(b"x-api-key")
    return value.decode("latin-1") if value is not None else None


def has_header(raw: Headers, name: bytes) -> bool:
    return any(n == name for n, _ in raw)


def header_map(raw: Headers) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in raw}


def sniff_model(body: bytes) -> str | None:
    """The `model` of a JSON body (embeddings, completions...), for model-based routes."""
    if not body or not body.lstrip().startswith(b"{"):
        return None
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    model = parsed.get("model") if isinstance(parsed, dict) else None
    return model if isinstance(model, str) else None
