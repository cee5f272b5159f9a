"""The `auth:` config section: the proxy keys clients must present.

```yaml
auth:
  keys: ["${CURATOR_KEY}"]       # clients send `Authorization: Bearer <one of these>`
  allow_unauthenticated: false   # see below
  admin_keys: ["${CURATOR_ADMIN_KEY}"]   # the audit viewer's keys (none: no key needed)
```
With `keys` set, every request but `GET /healthz` needs one of them (else 401
`invalid_proxy_key`), as `Authorization: Bearer <key>` or, from Azure clients, `api-key:
<key>`. Both headers stop at the proxy: an upstream with an `api_key` gets that key, one
without gets no credential at all (a local vLLM or Ollama, say).

Without keys, anyone who can reach the proxy spends the upstream `api_key`, so `curator
serve` refuses a non-loopback address when some upstream has one, unless
`allow_unauthenticated: true` says that exposure is intended (a private network, say).

`admin_keys` is a separate list for the admin listener's audit viewer (`proxy.viewer`):
a client key never opens the viewer, and an admin key never spends the upstream. A key in
both lists is refused at load, since it would make every client holding it an admin.

Problems never quote a key: config errors are printed and logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from policies import validate as v
from policies.validate import Reader
from policies.yamlsrc import KeyPath

AUTH_KEYS = ("keys", "allow_unauthenticated", "admin_keys")


@dataclass(frozen=True, slots=True)
class AuthConfig:
    """Proxy keys (empty: no key needed) and whether a keyless public bind is intended."""

    keys: tuple[str, ...] = ()
    allow_unauthenticated: bool = False
    admin_keys: tuple[str, ...] = ()
    """Keys for the audit viewer; empty: the viewer needs none."""

    @property
    def enabled(self) -> bool:
        return bool(self.keys)


def read_auth(read: Reader, value: object, path: KeyPath) -> AuthConfig:
    """An `auth:` mapping -> AuthConfig; problems go to `read` with their key path."""
    data = read.mapping(value, path, AUTH_KEYS)
    if data is None:
        return AuthConfig()
    allow = read.get(data, "allow_unauthenticated", path, False, v.boolean)
    keys = _keys(read, data.get("keys"), (*path, "keys"))
    admin = _keys(read, data.get("admin_keys"), (*path, "admin_keys"), clients=keys)
    return AuthConfig(keys=tuple(keys), allow_unauthenticated=allow, admin_keys=tuple(admin))


def _keys(
    read: Reader, value: object, path: KeyPath, clients: Mapping[str, int] = MappingProxyType({})
) -> dict[str, int]:
    """The usable keys of the list, in order, each with its index there. A key in `clients`
    (the client keys, for the admin list) is a problem: it would make its holders admins."""
    if value is None:
        return {}
    if not isinstance(value, list):
        read.problems.add(path, f"expected a list of keys, got {_kind(value)}")
        return {}
    first: dict[str, int] = {}
    for i, key in enumerate(value):
        problem = key_problem(key)
        if problem is None and key in first:
            problem = f"duplicate key (also {path[-1]}[{first[key]}])"
        if problem is None and key in clients:
            problem = f"also a client key (keys[{clients[key]}]): an admin key must be apart"
        if problem is not None:
            read.problems.add((*path, i), problem)
        else:
            first[key] = i
    return first


def key_problem(key: object) -> str | None:
    """What is wrong with a proxy key, without quoting it; None when it is usable."""
    if not isinstance(key, str) or not key:
        what = "an empty string" if key == "" else _kind(key)
        return f"expected a non-empty key (is its ${{VARIABLE}} set?), got {what}"
    if not all("!" <= c <= "~" for c in key):
        return "expected printable ASCII without spaces (it is sent as a Bearer token)"
    return None


def _kind(value: object) -> str:
    """Like `describe`, without the value itself: it may be a secret."""
    if value is None:
        return "null"
    return _KINDS.get(type(value), type(value).__name__)


_KINDS: Mapping[type, str] = MappingProxyType(
    {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        dict: "a mapping",
        list: "a list",
    }
)
