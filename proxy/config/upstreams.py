"""The `upstreams:` section: where requests go, with what key and timeouts.

An upstream's `kind` says whose API it serves: `openai` (OpenAI and every OpenAI-compatible
server; the default) or `anthropic` (Anthropic's Messages API). A request goes only to an
upstream of its own vendor's kind (`proxy.protocols.vendor`). An `anthropic` upstream's
`base_url` defaults to `https://api.anthropic.com` and is given without `/v1`, as
`ANTHROPIC_BASE_URL` is; its `api_key` goes out as `x-api-key`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from policies import validate as v
from policies.validate import Reader
from policies.yamlsrc import KeyPath

Kind = Literal["openai", "anthropic"]
KINDS: tuple[Kind, ...] = ("openai", "anthropic")
ANTHROPIC_BASE_URL = "https://api.anthropic.com"


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    name: str
    base_url: str
    """No trailing slash; request paths under /v1 are appended to it."""
    api_key: str | None = None
    """Set: replaces the client's Authorization. None/empty: the client's is passed through."""
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 600.0
    """Longest silence allowed between two bytes of the response (SSE pauses included)."""
    discover_models: bool = True
    """Read `GET {base_url}/models` at start and on reload for the models' context windows
    (`proxy.upstream.models`); false for an upstream that must not be asked."""
    kind: Kind = "openai"
    """Whose API it serves (see the module docstring)."""

    @property
    def api_base(self) -> str:
        """What `/v1/<rest>` is appended to as `/<rest>`: `base_url` for OpenAI's kind (it
        ends in /v1), `base_url` + `/v1` for Anthropic's (given without it)."""
        return self.base_url + "/v1" if self.kind == "anthropic" else self.base_url


UPSTREAM_KEYS = (
    "kind",
    "base_url",
    "api_key",
    "connect_timeout_s",
    "read_timeout_s",
    "discover_models",
)


def read_upstreams(
    read: Reader, value: object, path: KeyPath, declared: set[str]
) -> dict[str, UpstreamConfig]:
    """The `upstreams:` section; every name seen goes into `declared`, valid or not (so a
    route naming an invalid one gets no second error)."""
    upstreams: dict[str, UpstreamConfig] = {}
    for name, item, item_path in read.named(value, path):
        declared.add(name)
        data = read.mapping(item, item_path, UPSTREAM_KEYS)
        if data is None:
            continue
        get, default = read.get, UpstreamConfig(name, "")
        kind: Kind = get(data, "kind", item_path, "openai", v.one_of(*KINDS))
        anthropic = kind == "anthropic"
        if not anthropic:
            read.require(data, ("base_url",), item_path)
        base = ANTHROPIC_BASE_URL if anthropic else ""
        connect = get(
            data, "connect_timeout_s", item_path, default.connect_timeout_s, v.positive_number
        )
        silence = get(data, "read_timeout_s", item_path, default.read_timeout_s, v.positive_number)
        upstreams[name] = UpstreamConfig(
            name=name,
            base_url=get(data, "base_url", item_path, base, base_url_problem).rstrip("/"),
            api_key=get(data, "api_key", item_path, None, v.optional_text) or None,
            connect_timeout_s=float(connect),
            read_timeout_s=float(silence),
            # Anthropic's model list states no windows: nothing to learn there.
            discover_models=get(data, "discover_models", item_path, not anthropic, v.boolean),
            kind=kind,
        )
    return upstreams


def base_url_problem(value: Any) -> str | None:
    """Why `value` is no usable upstream base URL (None: it is one)."""
    if not isinstance(value, str):
        return "expected an http(s) URL"
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "expected an http(s) URL with a host, e.g. https://api.openai.com/v1"
    if parts.query or parts.fragment:
        return "expected a URL without a query or fragment"
    try:
        parts.port  # noqa: B018 - parsing the port is what validates it
    except ValueError:
        return "expected a port number from 0 to 65535 after the host"
    return None
