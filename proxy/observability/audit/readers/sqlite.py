"""Reading the SQLite audit store back, for `curator audit` (`proxy.cli.audit`)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from policies.messages import text_of
from proxy.observability.audit.readers.aggregate import GroupRow, sqlite_groups
from proxy.observability.audit.readers.aggregate_columns import column_groups
from proxy.observability.audit.readers.base import StoredRow, resolve_tools, stored_summary
from proxy.observability.audit.readers.cache_aggregate import CacheSums, sqlite_cache_sums
from proxy.observability.audit.readers.query import (
    FACET_LIMIT,
    FACETS,
    Page,
    Query,
    clamp,
    conversation_key,
    sql_where,
)
from proxy.observability.audit.sinks.sqlite import BUSY_TIMEOUT_MS, DIGEST_SIZE, split_digests

REPORT_COLUMNS_SINCE = 5
"""The schema version that added the report columns (`sinks.sqlite_schema`)."""


class SqliteReader:
    """Reads records back as plain dicts (the JSONL shape) for `curator audit`."""

    def __init__(self, path: str) -> None:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no audit store at {path}")
        uri = Path(path).absolute().as_uri() + "?mode=ro"
        self._conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
        self._roles: dict[bytes, object] = {}
        # The writer creates the file a moment before its tables: read that as "nothing yet",
        # as the PostgreSQL reader does, not as "no such table: records".
        tables = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'records'"
        if self._conn.execute(tables).fetchone() is None:
            self._conn.close()
            raise FileNotFoundError(f"no audit store at {path} (nothing written yet)")

    def summaries(self, *, limit: int, route: str | None = None) -> list[dict[str, Any]]:
        """The newest records, newest first, without their messages."""
        where, params = ("WHERE route = ? ", (route, limit)) if route else ("", (limit,))
        rows = self._conn.execute(
            "SELECT fields, length(original), length(curated) FROM records "
            f"{where}ORDER BY time DESC, seq DESC LIMIT ?",
            params,
        ).fetchall()
        return [stored_summary(*row) for row in rows]

    def get(self, record_id: str) -> dict[str, Any] | None:
        """The record with this id, or the only one whose id starts with it."""
        rows = self._conn.execute(
            "SELECT fields, original, curated FROM records WHERE id = ? ORDER BY seq DESC",
            (record_id,),
        ).fetchall()
        if not rows:
            pattern = record_id.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            rows = self._conn.execute(
                "SELECT fields, original, curated FROM records WHERE id LIKE ? ESCAPE '\\' LIMIT 2",
                (pattern + "%",),
            ).fetchall()
            if len(rows) > 1:
                raise LookupError(f"several records have ids starting with {record_id!r}")
        return self._full(*rows[0]) if rows else None

    def between(self, since: float, until: float | None = None) -> Iterator[dict[str, Any]]:
        """Full records with since <= time < until, oldest first."""
        end = float("inf") if until is None else until
        cursor = self._conn.execute(
            "SELECT fields, original, curated FROM records WHERE time >= ? AND time < ? "
            "ORDER BY time, seq",
            (since, end),
        )
        for row in cursor:
            yield self._full(*row)

    def stored_rows(self, since: float, until: float | None = None) -> Iterator[StoredRow]:
        """Records as stored, since <= time < until, oldest first (`ContentStore`)."""
        end = float("inf") if until is None else until
        cursor = self._conn.execute(
            "SELECT time, fields, original, curated FROM records WHERE time >= ? AND time < ? "
            "ORDER BY time, seq",
            (since, end),
        )
        for row in cursor:
            yield StoredRow(*row)

    def bodies(self, digests: list[bytes]) -> dict[bytes, bytes]:
        found: dict[bytes, bytes] = {}
        for i in range(0, len(digests), 500):
            chunk = digests[i : i + 500]
            marks = ",".join("?" * len(chunk))
            found.update(
                self._conn.execute(
                    f"SELECT hash, body FROM messages WHERE hash IN ({marks})", chunk
                ).fetchall()
            )
        return found

    def grouped(self, since: float, until: float | None) -> list[GroupRow]:
        """`curator report`'s totals by route, policy, model and day, summed in SQL: from
        the report columns, or from every record's JSON in a store older than them."""
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version < REPORT_COLUMNS_SINCE:
            return sqlite_groups(self._conn, since, until)
        return column_groups(self._conn, since, until)

    def conversation_fields(
        self, key: str, since: float, until: float | None
    ) -> Iterator[dict[str, Any]]:
        """`Aggregating.conversation_fields`: one conversation's records as summaries, the
        conversation they name compared in SQL (older records, naming none, by their first
        messages' digests and roles)."""
        end = float("inf") if until is None else until
        named = "json_extract(CAST(fields AS TEXT), '$.conversation')"
        cursor = self._conn.execute(
            "SELECT fields, original FROM records WHERE time >= ? AND time < ? "
            f"AND kind != 'summarizer' AND (substr({named}, 1, ?) = ? "
            f"OR coalesce({named}, '') = '') ORDER BY time, seq",
            (since, end, len(key), key),
        )
        for fields, original in cursor:
            row = resolve_tools(orjson.loads(fields), None)
            found = row.get("conversation")
            if not (isinstance(found, str) and found):
                found = self._conversation(split_digests(original))
            if found.startswith(key):
                yield row

    def search(self, query: Query) -> Page:
        """One page of the records `query` selects, newest first.

        The columns filter in SQL; a conversation or text filter is checked row by row on
        what the SQL selected, with each message looked at once per call at most.
        """
        query = clamp(query)
        where, params = sql_where(query, "?")
        sql = f"SELECT fields, original, curated FROM records{where} ORDER BY time DESC, seq DESC"
        wanted = query.offset + query.limit + 1
        if not (query.conversation or query.text):
            sql += " LIMIT ?"
            params.append(wanted)
        hits = self._text_hits(query.text) if query.text else set()
        rows: list[dict[str, Any]] = []
        for fields, original, curated in self._conn.execute(sql, params):
            digests = split_digests(original)
            row = resolve_tools(orjson.loads(fields), None)
            named = row.get("conversation")
            key = named if isinstance(named, str) and named else self._conversation(digests)
            if query.conversation and not key.startswith(query.conversation):
                continue
            if query.text and not self._has_text(fields, digests, curated, hits, query.text):
                continue
            rows.append(self._summary(row, digests, curated, key))
            if len(rows) == wanted:
                break
        page = rows[query.offset : query.offset + query.limit]
        return Page(page, more=len(rows) == wanted)

    def facets(self) -> dict[str, list[str]]:
        return {
            column: [
                str(value)
                for (value,) in self._conn.execute(
                    f"SELECT DISTINCT {column} FROM records WHERE {column} IS NOT NULL "
                    f"ORDER BY {column} LIMIT {FACET_LIMIT}"
                )
            ]
            for column in FACETS
        }

    def _summary(
        self, row: dict[str, Any], digests: list[bytes], curated: bytes | None, key: str
    ) -> dict[str, Any]:
        row["messages"] = len(digests)
        row["curated_messages"] = len(digests) if curated is None else len(curated) // DIGEST_SIZE
        row["conversation"] = key
        return row

    def _conversation(self, digests: list[bytes]) -> str:
        roles: list[object] = []
        for digest in digests:
            role = self._roles.get(digest)
            if role is None:
                row = self._conn.execute(
                    "SELECT body FROM messages WHERE hash = ?", (digest,)
                ).fetchone()
                message = orjson.loads(row[0]) if row else None
                role = message.get("role") if isinstance(message, dict) else ""
                self._roles[digest] = role
            roles.append(role)
            if role == "user":
                break
        return conversation_key(digests, roles)

    def _text_hits(self, text: str) -> set[bytes]:
        """Digests of the messages whose stored JSON contains `text` (a superset: JSON
        escaping aside, a match in the text is a match in the JSON; checked again after)."""
        # SQLite lowers ASCII only: other text is matched in Python over every message.
        cursor = (
            self._conn.execute(
                "SELECT hash, body FROM messages WHERE instr(lower(CAST(body AS TEXT)), ?) > 0",
                (_json_fragment(text),),
            )
            if text.isascii()
            else self._conn.execute("SELECT hash, body FROM messages")
        )
        needle = text.casefold()
        return {
            digest for digest, body in cursor if needle in text_of(orjson.loads(body)).casefold()
        }

    def _has_text(
        self,
        fields: bytes,
        digests: list[bytes],
        curated: bytes | None,
        hits: set[bytes],
        text: str,
    ) -> bool:
        if hits.intersection(digests) or hits.intersection(split_digests(curated)):
            return True
        response = orjson.loads(fields).get("response")
        said = response.get("text") if isinstance(response, dict) else None
        return isinstance(said, str) and text.casefold() in said.casefold()

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

    def cache_sums(self, since: float, until: float | None) -> CacheSums:
        """`curator report --cache`'s sums per route and conversation, in SQL."""
        return sqlite_cache_sums(self._conn, since, until, self._full)

    def close(self) -> None:
        self._conn.close()


def _json_fragment(text: str) -> str:
    """`text` lowered as it appears inside a JSON string (orjson escapes only these)."""
    return orjson.dumps(text.lower()).decode()[1:-1]
