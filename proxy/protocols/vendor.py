"""Whose API a request speaks, and so which upstreams may take it and whose error shape the
proxy answers in.

A request is Anthropic's when its path is under `/v1/messages` (the Messages API and its
`count_tokens`), or when it carries an `anthropic-version` header (every Anthropic client
sends one: the SDKs, Claude Code), as a `GET /v1/models` from those clients does. Every
other request is OpenAI's (or an OpenAI-compatible server's). Routing gives a request only
the routes whose upstream is of its vendor's `kind` (`proxy.serving.routing.Router`), so a
request, and the key it carries, never goes to another vendor's upstream.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

Vendor = Literal["openai", "anthropic"]
VENDORS: tuple[Vendor, ...] = ("openai", "anthropic")
ANTHROPIC_PATH = "/v1/messages"
ANTHROPIC_VERSION = b"anthropic-version"
ANTHROPIC_KEY_PREFIX = b"sk-ant-"
"""How Anthropic's API keys (and Claude Code's OAuth tokens) start: a credential header
whose value starts so never goes to another vendor's upstream
(`proxy.upstream.hygiene.request_headers`)."""


def vendor_of(path: str, headers: Sequence[tuple[bytes, bytes]]) -> Vendor:
    """The API `path` with these (lower-cased, raw) headers belongs to."""
    if path == ANTHROPIC_PATH or path.startswith(ANTHROPIC_PATH + "/"):
        return "anthropic"
    for name, _ in headers:
        if name == ANTHROPIC_VERSION:
            return "anthropic"
    return "openai"
