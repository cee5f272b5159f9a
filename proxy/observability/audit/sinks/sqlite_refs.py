"""Reference counts of the SQLite audit store's messages: a body is kept exactly while a
record references it, and an agent's resent history is not counted again every turn.

A record's references are its messages' digests, original then curated, and its tools'
(a multiset: a kept message is in both lists). A record may name a `base`: a record this
sink wrote recently whose last original message is among its own, nearest the end (an
agent's next turn resends the previous turn's messages; a client that trims its history
still resends the newest). It then counts only what it references beyond its base
(`Counter` difference); what they share, the base counts. A turn that resends a
163-message history and adds one message counts one reference, not ~300. Before, every
turn raised ~300 counts, rewriting ~13 pages of the index (~52 KB of WAL a turn): writing
the bench's warm 127k-token record took 0.37-0.63 ms, now 0.19-0.31 (in-process). Only
records of `CHAIN_MIN_REFS` or more references take part; a batch's small ones count
their references together.

Invariant: `refs(d)` is the sum over stored records X of `own(X)(d)`, where `own(X)` is
X's references minus its base's while X names one, else all of X's. A stored record's
every reference then has a count of at least one (down its chain of bases, the first
record not naming one counts it), and a count of zero means no record references it.

Retention deletes the oldest records first (`unref`). Deleting X takes `own(X)` off, and
each record naming X as its base stops naming one and counts, from then on, everything it
references: it gains what it shared with X. A writer picks a base only among the records
it wrote itself and, in its transaction (which holds the write lock), checks that the base
is still stored as it was written (a seq can be reused once the newest records are gone).
"""

from __future__ import annotations

import sqlite3
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from proxy.observability.audit.entry import AuditRecord
from proxy.observability.audit.sinks.base import blobs_of, split_digests, tools_digest

CHAIN_MIN_REFS = 16
"""References a record needs to name a base or be one: a batch's small records count
their references together (an upsert row per distinct message), which cost less than
a base does (measured: 17-23 us a small record's write, 23-38 with bases)."""
CHAINS_MAX = 256
"""Records a sink remembers as bases, by their last original message (each with its
references, ~5 KB for a 163-message turn: ~1.3 MB at most)."""


def references(*records: AuditRecord) -> Counter[bytes]:
    """What `records` reference, as stored rows of them say (`stored_references`)."""
    return Counter(m.digest for record in records for m in blobs_of(record))


def stored_references(original: bytes, curated: bytes | None, fields: bytes) -> Counter[bytes]:
    refs = Counter(split_digests(original))
    refs.update(split_digests(curated))
    refs.update(tools_digest(fields))
    return refs


@dataclass(slots=True)
class _Last:
    seq: int
    time: float
    id: str | None
    refs: bytes
    """Its references, each digest as often as referenced."""


@dataclass(slots=True)
class Counted:
    """A batch's records with their seqs and bases, and the counts they add."""

    first_seq: int | None
    """None: no record of the batch is big enough for a base, and SQLite numbers them."""
    bases: list[int | None]
    adds: Counter[bytes]
    last: dict[bytes, _Last] = field(default_factory=dict)

    def seqs(self) -> list[int | None]:
        if self.first_seq is None:
            return [None] * len(self.bases)
        return list(range(self.first_seq, self.first_seq + len(self.bases)))


class Chains:
    """The records this sink wrote last (`CHAINS_MAX`), by their last original message."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: OrderedDict[bytes, _Last] = OrderedDict()

    def clear(self) -> None:
        self._last.clear()

    def count(self, conn: sqlite3.Connection, records: Sequence[AuditRecord]) -> Counted:
        """Seqs, bases and counts for `records`, in a transaction holding the write lock."""
        if not any(big(record) for record in records):
            return Counted(None, [None] * len(records), references(*records))
        first: int = conn.execute("SELECT coalesce(max(seq), 0) + 1 FROM records").fetchone()[0]
        counted = Counted(first, [], Counter())
        for seq, record in enumerate(records, first):
            refs = references(record)
            if not big(record):
                counted.bases.append(None)
                counted.adds.update(refs)
                continue
            base = self._base(conn, record, counted.last)
            counted.bases.append(None if base is None else base.seq)
            counted.adds.update(refs if base is None else refs - Counter(split_digests(base.refs)))
            if record.original:
                rid = record.fields.get("id")
                last = _Last(seq, record.time, rid, b"".join(refs.elements()))
                counted.last[record.original[-1].digest] = last
        return counted

    def remember(self, counted: Counted) -> None:
        """Once the batch is committed: its records are the next ones' bases."""
        for key, last in counted.last.items():
            self._last[key] = last
            self._last.move_to_end(key)
        while len(self._last) > CHAINS_MAX:
            self._last.popitem(last=False)

    def _base(
        self, conn: sqlite3.Connection, record: AuditRecord, batch: dict[bytes, _Last]
    ) -> _Last | None:
        """The record written last whose last message is `record`'s nearest its end."""
        for message in reversed(record.original):
            key = message.digest
            found = batch.get(key)
            if found is not None:
                return found
            if key in self._last:
                return self._stored(conn, key)
        return None

    def _stored(self, conn: sqlite3.Connection, key: bytes) -> _Last | None:
        last = self._last[key]
        row = conn.execute(
            "SELECT 1 FROM records WHERE seq = ? AND time = ? AND id IS ?",
            (last.seq, last.time, last.id),
        ).fetchone()
        if row is None:  # retention (maybe another worker's) deleted it
            del self._last[key]
            return None
        return last


def big(record: AuditRecord) -> bool:
    """Whether `record` is an agent's turn: enough references to name a base."""
    return len(record.original) + len(record.curated or ()) >= CHAIN_MIN_REFS


def unref(conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]]) -> Counter[bytes]:
    """What deleting `rows` ((seq, base, original, curated, fields), oldest first) changes
    in the counts; the records left that name one of them as their base stop naming one.

    Records of one conversation deleted together are each other's bases: each gives up
    only what it owns, and nothing is handed between them."""
    doomed = {row[0] for row in rows}
    named = _successors(conn, doomed)
    refs_of: dict[int, Counter[bytes]] = {}
    delta: Counter[bytes] = Counter()
    for seq, base, *blobs in rows:
        mine = refs_of[seq] = stored_references(*blobs)
        delta.subtract(_owned(conn, mine, base, refs_of))
        left = [successor for successor in named.get(seq, ()) if successor not in doomed]
        for successor in left:
            row = conn.execute(
                "SELECT original, curated, fields FROM records WHERE seq = ?", (successor,)
            ).fetchone()
            delta.update(stored_references(*row) & mine)
        if left:
            conn.execute("UPDATE records SET base = NULL WHERE base = ?", (seq,))
    return delta


def _successors(conn: sqlite3.Connection, seqs: set[int]) -> dict[int, list[int]]:
    """The records naming each of `seqs` as their base, in one query. One query a record
    deleted cost small records, which name none, 15 -> 17 us each to prune; this way
    11-12 -> 12-13 (20,000 records, two pairs)."""
    named: dict[int, list[int]] = {}
    if seqs:
        rows = conn.execute(
            "SELECT seq, base FROM records WHERE base BETWEEN ? AND ?", (min(seqs), max(seqs))
        )
        for seq, base in rows:
            if base in seqs:
                named.setdefault(base, []).append(seq)
    return named


def _owned(
    conn: sqlite3.Connection,
    mine: Counter[bytes],
    base: int | None,
    known: dict[int, Counter[bytes]],
) -> Counter[bytes]:
    """What a record counts: `mine` less its base's references while it names one."""
    if base is None:
        return mine
    theirs = known.get(base)
    if theirs is None:
        row = conn.execute(
            "SELECT original, curated, fields FROM records WHERE seq = ?", (base,)
        ).fetchone()
        if row is None:  # a base named but missing would mean lost counts: never free early
            return Counter()
        theirs = stored_references(*row)
    return mine - theirs
