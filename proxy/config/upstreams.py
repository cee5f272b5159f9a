"""The `upstreams:` section: where requests go, with what key and timeouts.

An upstream's `kind` says whose API it serves: `openai` (OpenAI and every OpenAI-compatible
server; the default) or `anthropic` (Anthropic's Messages API). A request goes only to an
upstream of its own vendor's kind (`proxy.protocols.vendor`). An `anthropic` upstream's
`base_url` defaults to `https://api.anthropic.com` and is given without `/v1`, as
`ANTHROPIC_BASE_URL` is; its `api_key` goes out as `x-api-key`.
"""

from __future__ import annotations

import base64
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import unquote, urlsplit, urlunsplit

from policies import validate as v
from policies.validate import Reader
from policies.yamlsrc import KeyPath

Kind = Literal["openai", "anthropic"]
KINDS: tuple[Kind, ...] = ("openai", "anthropic")
ANTHROPIC_BASE_URL = "https://api.anthropic.com"


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    """One upstream. A `user:password@` in `base_url` leaves the URL as it is built: it
    becomes `authorization` (Basic), so no URL the proxy sends, logs or prints carries it."""

    name: str
    base_url: str
    """No trailing slash; request paths under /v1 are appended to it. Never credentials."""
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
    credentials: str | None = None
    """`user:password` (percent-decoded) taken out of a `base_url` given with them."""
    authorization: bytes | None = field(init=False, repr=False, compare=False)
    """The credential the upstream gets in place of the client's: for OpenAI's kind the
    Authorization value (`Bearer <api_key>`, or `Basic` from `credentials`), for
    Anthropic's the `x-api-key` value (`api_key`); None passes the client's through."""

    def __post_init__(self) -> None:
        base_url, credentials = split_credentials(self.base_url)
        if credentials is not None:
            object.__setattr__(self, "base_url", base_url)
            object.__setattr__(self, "credentials", credentials)
        authorization = None
        if self.api_key:
            key = self.api_key.encode("latin-1")
            authorization = key if self.kind == "anthropic" else b"Bearer " + key
        elif self.credentials is not None:
            authorization = b"Basic " + base64.b64encode(self.credentials.encode())
        object.__setattr__(self, "authorization", authorization)

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
        if upstreams[name].api_key and upstreams[name].credentials is not None:
            read.problems.add(
                (*item_path, "api_key"),
                "set together with user:password in base_url, but a request carries one "
                "Authorization: keep the api_key or the URL's credentials, not both",
            )
    return upstreams


def cleartext_warnings(upstreams: Iterable[UpstreamConfig]) -> list[str]:
    """A warning for each upstream whose key would cross the network unencrypted: an
    `api_key` or URL credentials over `http://` to a host that is not loopback."""
    out = []
    for upstream in upstreams:
        parts = urlsplit(upstream.base_url)
        host = parts.hostname or ""
        if upstream.authorization and parts.scheme == "http" and not is_loopback(host):
            what = "api_key" if upstream.api_key else "URL credentials"
            out.append(
                f"warning: upstream {upstream.name!r} sends its {what} in clear text over "
                f"http:// to {host}, which is not loopback: anyone on the path can read it; "
                "use https://"
            )
    return out


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 in brackets or not) is this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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


def split_credentials(url: str) -> tuple[str, str | None]:
    """`url` without its `user:password@`, and those (percent-decoded, as httpx sent them
    as Basic auth); (url, None) when it has none or does not parse."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url, None
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, None
    user, _, password = userinfo.partition(":")
    bare = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return bare, f"{unquote(user)}:{unquote(password)}"
