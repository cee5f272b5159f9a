"""The PostgreSQL audit sink's registry entry: its keys, and opening it.

The writer (`postgres_writer`) and schema (`postgres_schema`) import psycopg, the
optional `postgres` extra; this module does not, so the registry loads without it and
`curator check` says what to install.

```yaml
audit:
  sink: postgres
  dsn: ${CURATOR_AUDIT_DSN}   # postgresql://user:password@host:5432/db, never printed
  retention_days: 30
```
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

from policies import validate as v
from policies.validate import Reader
from policies.yamlsrc import KeyPath
from proxy.observability.audit.sinks.base import Retention, Sink, SinkType, StoreUnavailable


def _read_options(read: Reader, data: Mapping[str, Any], path: KeyPath) -> dict[str, Any]:
    dsn = read.get(data, "dsn", path, None, v.optional_text)
    location = data.get("path")
    if not dsn and not (isinstance(location, str) and "://" in location):
        read.problems.add(
            (*path, "dsn"),
            "sink: postgres needs a connection string, e.g. dsn: ${CURATOR_AUDIT_DSN} "
            "(or path: postgresql://user@host/db)",
        )
    if importlib.util.find_spec("psycopg") is None:
        read.problems.add(
            (*path, "sink"),
            "sink: postgres needs its driver: pip install 'context-curator[postgres]'",
        )
    timeout = read.get(data, "connect_timeout_s", path, 5, v.positive_number)
    calls = read.get(data, "timeout_s", path, 10, v.positive_number)
    return {"dsn": dsn, "connect_timeout_s": timeout, "timeout_s": calls}


def _open(location: str, options: Mapping[str, Any], retention: Retention) -> Sink:
    from proxy.observability.audit.sinks import postgres_schema as schema
    from proxy.observability.audit.sinks.postgres_writer import PostgresSink

    return PostgresSink(
        schema.dsn_of(location, options),
        max_age_days=retention.max_age_days,
        connect_timeout_s=float(options.get("connect_timeout_s", 5)),
        timeout_s=float(options.get("timeout_s", schema.TIMEOUT_S)),
    )


def _migrate(location: str, options: Mapping[str, Any]) -> list[int]:
    import psycopg

    from proxy.observability.audit.sinks import postgres_schema as schema
    from proxy.observability.audit.sinks.report_backfill import backfill_postgres

    dsn = schema.dsn_of(location, options)
    with schema.connect(dsn) as conn:
        try:
            applied = schema.migrate(conn, where="audit.dsn")
            backfill_postgres(conn)  # every older record's report columns, in batches
            return applied
        except psycopg.Error as exc:
            raise StoreUnavailable(f"postgres: {schema.scrub(str(exc)).strip()}") from None


SINK = SinkType(
    "postgres",
    _open,
    schemes=("postgres", "postgresql"),
    keys=("dsn", "connect_timeout_s", "timeout_s"),
    read_options=_read_options,
    retention=("retention_days", "max_age_days"),
    location_key="dsn",
    migrate=_migrate,
    remote=True,
    by_reference=True,
)
