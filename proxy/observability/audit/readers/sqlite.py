"""Reading the SQLite audit store back, for `curator audit` (`proxy.cli.audit`)."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from proxy.observability.audit.sinks.sqlite import BUSY_TIMEOUT_MS, DIGEST_SIZE, split_digests


class SqliteReader:
    """Reads records back as plain dicts (the JSONL shape) for `curator audit`."""

    def __init__(self, path: str) -> None:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no audit store at {path}")
        uri = Path(path).absolute().as_uri() + "?mode=ro"
        self._conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000)

    def summaries(self, *, limit: int, route: str | None = None) -> list[dict[str, Any]]:
        """The newest records, newest first, without their messages."""
        where, params = ("WHERE route = ? ", (route, limit)) if route else ("", (limit,))
        rows = self._conn.execute(
            "SELECT fields, length(original), length(curated) FROM records "
            f"{where}ORDER BY time DESC, seq DESC LIMIT ?",
            params,
        ).fetchall()
        out = []
        for fields, n_original, n_curated in rows:
            summary = orjson.loads(fields)
            summary["messages"] = (n_original or 0) // DIGEST_SIZE
            summary["curated_messages"] = (n_curated or n_original or 0) // DIGEST_SIZE
            out.append(summary)
        return out

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

    def _full(self, fields: bytes, original: bytes, curated: bytes | None) -> dict[str, Any]:
        record: dict[str, Any] = orjson.loads(fields)
        record["original"] = self._messages(split_digests(original))
        record["curated"] = (
            record["original"] if curated is None else self._messages(split_digests(curated))
        )
        return record

    def _messages(self, digests: list[bytes]) -> list[Any]:
        found: dict[bytes, Any] = {}
        unique = list(dict.fromkeys(digests))
        for i in range(0, len(unique), 500):
            chunk = unique[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for digest, body in self._conn.execute(
                f"SELECT hash, body FROM messages WHERE hash IN ({marks})", chunk
            ):
                found[digest] = orjson.loads(body)
        return [found.get(d, {"missing": d.hex()}) for d in digests]

    def close(self) -> None:
        self._conn.close()
