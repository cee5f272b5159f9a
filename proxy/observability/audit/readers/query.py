"""What the web viewer asks of an audit store: a `Query`, answered by a `Reader` as a `Page`.

Every store reader (SQLite, JSONL, and the PostgreSQL one to come) implements `Reader`;
`matches` is the reference semantics of a query on one full record, which a scanning
reader uses as is and an indexed reader must agree with (the tests run both).

Conversations: a record names its own (`conversation`: the client's `x-session-id`, else the
conversation whose latest request its history extends, `audit.threads`). A record written
before it did is grouped by `conversation_key`, a digest of the conversation's pinned prefix
(the messages before the first user message) and its first user message.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from policies.messages import text_of
from proxy.observability.audit.stamps import parse_iso

KINDS = ("chat", "responses", "summarizer")
"""Record kinds a query may ask for; `summary` is accepted for `summarizer`."""
MAX_LIMIT = 500
FACETS = ("route", "policy", "model", "status")
FACET_LIMIT = 200
KEY_CHARS = 16
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
"""Hex digits of a conversation key."""


@dataclass(frozen=True, slots=True)
class Query:
    """Filters (None: any) and a page: newest first, `offset` records skipped."""

    route: str | None = None
    policy: str | None = None
    model: str | None = None
    status: int | None = None
    kind: str | None = None
    since: float | None = None
    """Seconds since the epoch, inclusive."""
    until: float | None = None
    """Seconds since the epoch, exclusive."""
    conversation: str | None = None
    """A `conversation_key`, or a prefix of one."""
    parent: str | None = None
    """A `parent_id`: the calls made on that request's behalf (summaries, rescued attempts)."""
    text: str | None = None
    """Case-insensitive substring of any message's text or the response's."""
    limit: int = 50
    offset: int = 0


class BadInput(ValueError):
    """A read the store refuses for what it was asked, not for its own state (PostgreSQL:
    a NUL byte in a text filter or an id): the asker's mistake, a 400, never a 503."""


@dataclass(frozen=True, slots=True)
class Page:
    """One page of summaries (records without their messages), and whether more follow."""

    rows: list[dict[str, Any]]
    more: bool


class Reader(Protocol):
    """A store as the viewer reads it. Summaries carry the record's fields plus
    `messages`, `curated_messages` (counts) and `conversation` (its key)."""

    def search(self, query: Query) -> Page: ...

    def get(self, record_id: str) -> dict[str, Any] | None:
        """The full record with this id, or the only one whose id starts with it; raises
        LookupError when several do."""
        ...

    def facets(self) -> dict[str, list[str]]:
        """The values of `route`, `policy`, `model` and `status` the store holds, sorted,
        for the viewer's filter menus (at most `FACET_LIMIT` each)."""
        ...

    def close(self) -> None: ...


def normal_kind(kind: str | None) -> str | None:
    return "summarizer" if kind == "summary" else kind


def message_digest(message: object) -> bytes:
    """The content address stores use for a message (see `audit.entry.message_digest`)."""
    data = orjson.dumps(message, option=orjson.OPT_SORT_KEYS)
    return hashlib.blake2b(data, digest_size=16).digest()


def conversation_key(digests: Sequence[bytes], roles: Sequence[object]) -> str:
    """The key of a conversation whose first messages have these digests and roles."""
    h = hashlib.blake2b(digest_size=KEY_CHARS // 2)
    for digest, role in zip(digests, roles, strict=False):
        h.update(digest)
        if role == "user":
            break
    return h.hexdigest()


def record_conversation(record: Mapping[str, Any]) -> str:
    """The conversation a full record names, else `conversation_key` of its original
    messages (a record written before records named it)."""
    named = record.get("conversation")
    if isinstance(named, str) and named:
        return named
    original = record.get("original") or []
    roles = [m.get("role") if isinstance(m, Mapping) else None for m in original]
    upto = next((i + 1 for i, r in enumerate(roles) if r == "user"), len(roles))
    return conversation_key([message_digest(m) for m in original[:upto]], roles[:upto])


def matches(record: Mapping[str, Any], when: float, query: Query) -> bool:
    """Whether a full record from time `when` passes every filter of `query` (not paging)."""
    fields = (
        (query.route, "route"),
        (query.policy, "policy"),
        (query.model, "model"),
        (query.status, "status"),
        (normal_kind(query.kind), "kind"),
        (query.parent, "parent_id"),
    )
    if any(want is not None and record.get(key) != want for want, key in fields):
        return False
    if query.since is not None and when < query.since:
        return False
    if query.until is not None and when >= query.until:
        return False
    if query.conversation and not record_conversation(record).startswith(query.conversation):
        return False
    return not query.text or contains_text(record, query.text)


def contains_text(record: Mapping[str, Any], text: str) -> bool:
    needle = text.casefold()
    return any(needle in hay.casefold() for hay in _texts(record))


def _texts(record: Mapping[str, Any]) -> Iterator[str]:
    for key in ("original", "curated"):
        for msg in record.get(key) or ():
            if isinstance(msg, Mapping):
                yield text_of(msg)
    response = record.get("response")
    if isinstance(response, Mapping) and isinstance(response.get("text"), str):
        yield response["text"]


def summary(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record's fields without messages, with their counts and its conversation key."""
    out = {k: v for k, v in record.items() if k not in ("original", "curated")}
    out["messages"] = len(record.get("original") or ())
    out["curated_messages"] = len(record.get("curated") or ())
    out["conversation"] = record_conversation(record)
    return out


def clamp(query: Query) -> Query:
    """`query` with its page inside sane bounds."""
    limit = min(max(query.limit, 1), MAX_LIMIT)
    offset = max(query.offset, 0)
    return dataclasses.replace(query, limit=limit, offset=offset)


def time_window(since: str, until: str | None) -> tuple[float, float | None]:
    """`--since` and `--until` (None: now, open-ended) as epoch seconds, read at one `now`.
    Raises ValueError for a time it cannot read."""
    now = time.time()
    return parse_time(since, now=now), (parse_time(until, now=now) if until else None)


def parse_time(text: str, *, now: float) -> float:
    """An ISO-8601 time (UTC unless it says otherwise), or a duration ago such as `90m`."""
    match = _DURATION.fullmatch(text.strip())
    if match:
        return now - float(match.group(1)) * _SECONDS[match.group(2)]
    try:
        return parse_iso(text.strip())
    except ValueError:
        raise ValueError(
            f"expected an ISO time (2025-01-31T12:00:00Z) or a duration (30m, 1h, 2d), got {text!r}"
        ) from None


def sql_where(query: Query, mark: str) -> tuple[str, list[Any]]:
    """The WHERE clause for `query`'s column filters and time range, with `mark` as the
    driver's placeholder (`?` for SQLite, `%s` for psycopg), and its parameters."""
    clauses: list[str] = []
    params: list[Any] = []
    for column, value in (
        ("route", query.route),
        ("policy", query.policy),
        ("model", query.model),
        ("status", query.status),
        ("kind", normal_kind(query.kind)),
        ("parent_id", query.parent),
    ):
        if value is not None:
            clauses.append(f"{column} = {mark}")
            params.append(value)
    if query.since is not None:
        clauses.append(f"time >= {mark}")
        params.append(query.since)
    if query.until is not None:
        clauses.append(f"time < {mark}")
        params.append(query.until)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params
