"""The `viewer:` config section: where the audit web viewer (`proxy.viewer`) is served.

```yaml
viewer:
  enabled: true    # default: on the admin listener (metrics.port) when the audit log is on
  public: false    # also on the client port, under /curator/ (needs auth.admin_keys)
```
The viewer shows what clients sent, redacted as the audit log stores it. It is served on the
admin listener only, which operators keep off the public network; `public: true` also
serves it on the client-facing port, and is refused without `auth.admin_keys`.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies import validate as v
from policies.validate import Reader
from policies.yamlsrc import KeyPath

KEYS = ("enabled", "public")
PUBLIC_PREFIX = "/curator"
"""Where `public: true` mounts the viewer on the client port (outside /v1/)."""


@dataclass(frozen=True, slots=True)
class ViewerConfig:
    """Whether the audit viewer is served on the admin listener and on the client port."""

    enabled: bool = True
    public: bool = False


def read_viewer(
    read: Reader, value: object, path: KeyPath, *, admin_keys: tuple[str, ...]
) -> ViewerConfig:
    """Read a `viewer:` mapping, reporting problems into the loader's shared `Reader`."""
    data = read.mapping(value, path, KEYS)
    if data is None:
        return ViewerConfig()
    config = ViewerConfig(
        enabled=read.get(data, "enabled", path, True, v.boolean),
        public=read.get(data, "public", path, False, v.boolean),
    )
    if config.public and not admin_keys:
        read.problems.add(
            (*path, "public"),
            "needs auth.admin_keys: the viewer shows what clients sent, so on the client "
            "port it must not open without a key",
        )
    return config
