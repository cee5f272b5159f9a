"""Reading the PostgreSQL audit store back, for `curator audit` and the viewer: every
replica's records.

The viewer's `search` filters on columns in SQL; a conversation or text filter is checked
on full records with `query.matches`, the reference semantics, a chunk at a time.

A psycopg error is mapped as it happens (`_rows`): unavailability (the server gone
mid-read, a statement timeout) to `StoreUnavailable`, a value the server refuses (a NUL
byte in a filter or an id: `psycopg.DataError`) to `query.BadInput`.

The connection is read-only (it works against a hot standby) and autocommit, so a long
`export` holds no transaction open on the primary.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, LiteralString

import orjson
import psycopg

from proxy.observability.audit.readers.aggregate import GroupRow, typed_row
from proxy.observability.audit.readers.aggregate_columns import merged
from proxy.observability.audit.readers.aggregate_postgres import (
    POSTGRES_COLUMN_GROUPS,
    POSTGRES_GROUPS,
)
from proxy.observability.audit.readers.base import StoredRow, resolve_tools, stored_summary
from proxy.observability.audit.readers.cache_aggregate import CacheSums, postgres_cache_sums
from proxy.observability.audit.readers.query import (
    FACET_LIMIT,
    FACETS,
    BadInput,
    Page,
    Query,
    clamp,
    matches,
    record_conversation,
    sql_where,
    summary,
)
from proxy.observability.audit.sinks import postgres_schema as schema
from proxy.observability.audit.sinks.base import StoreUnavailable, split_digests

_FULL = "SELECT fields, original, curated FROM audit_records "
CHUNK = 1000
REPORT_COLUMNS_SINCE = 2
"""The schema version that added the report columns; an older store's report reads JSON."""
REPORT_TIMEOUT_S = 600
"""A report's statements (`grouped`, `conversation_fields`) may run this long: adding up a
million records takes longer than the writer's `timeout_s`, which the connection has."""


class PostgresReader:
    """Reads records back as plain dicts (the JSONL shape) for `curator audit`."""

    def __init__(self, dsn: str) -> None:
        self._conn = schema.connect(dsn, read_only=True)
        try:
            current = schema.version(self._conn)
        except psycopg.Error as exc:
            self._conn.close()
            raise StoreUnavailable(f"postgres: {schema.scrub(str(exc)).strip()}") from None
        if current == 0:
            self._conn.close()
            raise FileNotFoundError("no audit store in this database (nothing written yet)")
        self._columns = current >= REPORT_COLUMNS_SINCE

    def summaries(self, *, limit: int, route: str | None = None) -> list[dict[str, Any]]:
        """The newest records, newest first, without their messages."""
        rows = self._rows(
            "SELECT fields, length(original), length(curated) FROM audit_records "
            "WHERE %s::text IS NULL OR route = %s ORDER BY time DESC, uid LIMIT %s",
            (route, route, limit),
        )
        return [stored_summary(*row) for row in rows]

    def get(self, record_id: str) -> dict[str, Any] | None:
        """The record with this id, or the only one whose id starts with it."""
        rows = self._rows(_FULL + "WHERE id = %s ORDER BY time DESC LIMIT 1", (record_id,))
        if not rows:
            pattern = record_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            rows = self._rows(_FULL + "WHERE id LIKE %s LIMIT 2", (pattern + "%",))
            if len(rows) > 1:
                raise LookupError(f"several records have ids starting with {record_id!r}")
        return self._full(*rows[0]) if rows else None

    def between(self, since: float, until: float | None = None) -> Iterator[dict[str, Any]]:
        """Full records with since <= time < until, oldest first, a chunk at a time."""
        for row in self.stored_rows(since, until):
            yield self._full(row.fields, row.original, row.curated)

    def stored_rows(self, since: float, until: float | None = None) -> Iterator[StoredRow]:
        """Records as stored, since <= time < until, oldest first (`ContentStore`), a
        chunk at a time: a chunk is what is held, not the range."""
        end = float("inf") if until is None else until
        after = (since, b"")
        while True:
            rows = self._rows(
                "SELECT time, uid, fields, original, curated FROM audit_records "
                "WHERE (time, uid) > (%s, %s) AND time >= %s AND time < %s "
                "ORDER BY time, uid LIMIT %s",
                (*after, since, end, CHUNK),
            )
            for when, _, fields, original, curated in rows:
                yield StoredRow(when, fields, original, curated)
            if len(rows) < CHUNK:
                return
            after = (rows[-1][0], rows[-1][1])

    def bodies(self, digests: list[bytes]) -> dict[bytes, bytes]:
        rows = self._rows(
            "SELECT hash, body FROM audit_messages WHERE hash = ANY(%s::bytea[])", (digests,)
        )
        return {bytes(digest): bytes(body) for digest, body in rows}

    def grouped(self, since: float, until: float | None) -> list[GroupRow]:
        """`curator report`'s totals by route, policy, model and day, summed in SQL."""
        end = float("inf") if until is None else until
        with self._patient():
            if not self._columns:
                return [typed_row(r) for r in self._rows(POSTGRES_GROUPS, (since, end))]
            rows = self._rows(POSTGRES_COLUMN_GROUPS, (since, end) * 2)
            return merged(typed_row(r) for r in rows)

    def conversation_fields(
        self, key: str, since: float, until: float | None
    ) -> Iterator[dict[str, Any]]:
        """`Aggregating.conversation_fields`: the conversation compared in SQL; an older
        record naming none is read whole, its key derived as the viewer derives it."""
        end = float("inf") if until is None else until
        with self._patient():
            rows = self._conversation_rows(key, since, end)
        for fields, original, curated in rows:
            row = resolve_tools(orjson.loads(fields), None)
            found = row.get("conversation")
            if not (isinstance(found, str) and found):
                found = record_conversation(self._full(fields, original, curated))
            if found.startswith(key):
                yield row

    def _conversation_rows(self, key: str, since: float, end: float) -> list[tuple[Any, ...]]:
        return self._rows(
            "SELECT fields, original, curated FROM (SELECT time, uid, fields, original, curated, "
            "replace(convert_from(fields, 'UTF8'), '\\u0000', '\\ufffd')::jsonb "
            "->> 'conversation' AS named FROM audit_records WHERE time >= %s AND time < %s "
            "AND kind <> 'summarizer' OFFSET 0) AS r WHERE left(named, %s) = %s "
            "OR coalesce(named, '') = '' ORDER BY time, uid",
            (since, end, len(key), key),
        )

    @contextlib.contextmanager
    def _patient(self) -> Iterator[None]:
        """`REPORT_TIMEOUT_S` as the statement timeout meanwhile, then the one before."""
        before = self._rows("SHOW statement_timeout")[0][0]
        self._rows("SELECT set_config('statement_timeout', %s, false)", (f"{REPORT_TIMEOUT_S}s",))
        try:
            yield
        finally:
            self._rows("SELECT set_config('statement_timeout', %s, false)", (before,))

    def search(self, query: Query) -> Page:
        """One page of the records `query` selects, newest first (the viewer)."""
        query = clamp(query)
        where, params = sql_where(query, "%s")
        wanted = query.offset + query.limit + 1
        scan = bool(query.conversation or query.text)
        rows: list[dict[str, Any]] = []
        offset = 0
        while len(rows) < wanted:
            chunk = self._rows(
                "SELECT time, fields, original, curated FROM audit_records"
                f"{where} ORDER BY time DESC, uid LIMIT %s OFFSET %s".encode(),
                [*params, CHUNK if scan else wanted, offset],
            )
            for when, fields, original, curated in chunk:
                record = self._full(fields, original, curated)
                if not scan or matches(record, when, query):
                    rows.append(summary(record))
            if not scan or len(chunk) < CHUNK:
                break
            offset += CHUNK
        rows = rows[:wanted]
        return Page(rows[query.offset : query.offset + query.limit], more=len(rows) == wanted)

    def facets(self) -> dict[str, list[str]]:
        out = {}
        for column in FACETS:
            sql = (
                f"SELECT DISTINCT {column} FROM audit_records WHERE {column} IS NOT NULL "
                f"ORDER BY {column} LIMIT {FACET_LIMIT}"
            )
            out[column] = [str(value) for (value,) in self._rows(sql.encode())]
        return out

    def _full(self, fields: bytes, original: bytes, curated: bytes | None) -> dict[str, Any]:
        record = resolve_tools(orjson.loads(fields), self._messages)
        record["original"] = self._messages(split_digests(original))
        record["curated"] = (
            record["original"] if curated is None else self._messages(split_digests(curated))
        )
        return record

    def _messages(self, digests: list[bytes]) -> list[Any]:
        found = {d: orjson.loads(b) for d, b in self.bodies(list(dict.fromkeys(digests))).items()}
        return [found.get(d, {"missing": d.hex()}) for d in digests]

    def _rows(
        self, sql: LiteralString | bytes, params: Sequence[Any] | None = None
    ) -> list[tuple[Any, ...]]:
        """All rows `sql` selects, psycopg's errors mapped (see the module docstring)."""
        try:
            return self._conn.execute(sql, params).fetchall()
        except psycopg.DataError as exc:
            raise BadInput(schema.scrub(str(exc)).strip()) from None
        except psycopg.Error as exc:
            if schema.unavailable(exc):
                raise StoreUnavailable(f"postgres: {schema.scrub(str(exc)).strip()}") from None
            raise

    def cache_sums(self, since: float, until: float | None) -> CacheSums:
        """`curator report --cache`'s sums per route and conversation, in SQL."""
        return postgres_cache_sums(self._rows, since, until, self._full)

    def close(self) -> None:
        self._conn.close()
