"""`audit.spool`: the disk spool a remote audit store (postgres) is bridged by while it is down
or slow (`proxy.observability.audit.spool`). On by default for a remote sink.

```yaml
audit:
  sink: postgres
  dsn: ${CURATOR_AUDIT_DSN}
  spool:
    path: curator-audit-spool.db   # relative to the config file; shared by --workers
    max_bytes: 1GiB                # 0: no spool (an outage is held in memory, max_queue)
    max_age_hours: 72              # records spooled longer ago are dropped and counted
```
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policies import validate as v
from policies.validate import Reader
from policies.yamlsrc import KeyPath
from proxy.config.sizes import read_size

KEYS = ("path", "max_bytes", "max_age_hours")
DEFAULT_PATH = "curator-audit-spool.db"
DEFAULT_MAX_BYTES = 2**30
DEFAULT_MAX_AGE_HOURS = 72.0


@dataclass(frozen=True, slots=True)
class SpoolConfig:
    """Where the spool is and its bounds."""

    path: str
    """Resolved against the config file's folder."""
    max_bytes: int = DEFAULT_MAX_BYTES
    max_age_hours: float = DEFAULT_MAX_AGE_HOURS

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0


def read_spool(
    read: Reader, data: Mapping[str, Any], path: KeyPath, *, base_dir: Path, remote: bool
) -> SpoolConfig | None:
    """`audit.spool` of the `audit:` mapping `data`: the default spool for a remote sink when
    the key is absent, None for any other sink (where the key is a problem)."""
    where = (*path, "spool")
    given = data.get("spool")
    spool = read.mapping({} if given is None else given, where, KEYS)
    if given is not None and not remote:
        read.problems.add(where, "applies to a remote store only (sink: postgres)")
    if spool is None or not remote:
        return None
    raw = read.get(spool, "path", where, DEFAULT_PATH, v.text)
    size = read_size(read, spool, (*where, "max_bytes"), minimum=0)
    age = read.get(spool, "max_age_hours", where, DEFAULT_MAX_AGE_HOURS, v.positive_number)
    return SpoolConfig(
        path=str((base_dir / os.path.expanduser(raw)).absolute()),
        max_bytes=DEFAULT_MAX_BYTES if size is None else size,
        max_age_hours=float(age),
    )
