"""`curator report --cache`: why the prompt cache missed, per route and per conversation.

Each row adds up the records' `cache` field (`proxy.observability.usage.attribution`) and
usage: the hit rate (cached over input tokens), the tokens and dollars re-billed by cause,
and the cache-write amplification (tokens written to the cache per token read from it: 1.0
writes as much as is ever reused, above it writes go to waste; "-" when nothing was read).
With `--conversation KEY`, one row per turn instead: its cause, where its prompt parted
from the last turn's, and what that re-billed. SQLite and PostgreSQL add the groups up
themselves (`readers.cache_aggregate`); a JSONL file is read and added up here.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from proxy.cli.audit import conversation_of
from proxy.observability.audit.readers.cache_aggregate import CacheGroup, CacheSummed, CacheSums
from proxy.observability.audit.stamps import parse_iso
from proxy.observability.usage.attribution import SPLIT


@dataclass(slots=True)
class CacheRow:
    """Cache totals over a group of records (a route's, a conversation's, or one turn)."""

    scope: str
    """`route`, `conversation` or `turn`."""
    key: str
    route: str
    requests: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    rebilled: dict[str, int] = field(default_factory=dict)
    rebilled_usd: dict[str, float] = field(default_factory=dict)
    cause: str | None = None
    """Turns only: the turn's cause, and the element its prompt parted at."""
    diverged_at: str | None = None
    first: float = float("inf")
    """When its first record was (a conversation's route is its first record's)."""

    @property
    def hit_rate(self) -> float | None:
        return self.cached_tokens / self.input_tokens if self.input_tokens else None

    @property
    def amplification(self) -> float | None:
        return self.cache_write_tokens / self.cached_tokens if self.cached_tokens else None

    def add(self, record: Mapping[str, Any]) -> None:
        self.requests += 1
        usage = record.get("usage")
        if isinstance(usage, dict):
            self.input_tokens += _int(usage.get("input"))
            self.cached_tokens += _int(usage.get("cached"))
            self.cache_write_tokens += _int(usage.get("cache_write"))
            self.cache_write_tokens += _int(usage.get("cache_write_1h"))
        cache = record.get("cache")
        if not isinstance(cache, dict):
            return
        for cause, tokens in _pairs(cache.get("rebilled")):
            self.rebilled[cause] = self.rebilled.get(cause, 0) + int(tokens)
        for cause, usd in _pairs(cache.get("rebilled_usd")):
            self.rebilled_usd[cause] = self.rebilled_usd.get(cause, 0.0) + float(usd)
        if self.scope == "turn":
            self.cause = str(cache.get("cause"))
            self.diverged_at = element_text(cache.get("diverged_at"))

    def add_group(self, group: CacheGroup) -> None:
        """A group the database added up (`readers.cache_aggregate.CacheGroup`)."""
        n = len(SPLIT)
        self.requests += group[3]
        self.input_tokens += group[4]
        self.cached_tokens += group[5]
        self.cache_write_tokens += group[6]
        for cause, tokens, usd in zip(SPLIT, group[7 : 7 + n], group[7 + n :], strict=True):
            if tokens is not None:
                self.rebilled[cause] = self.rebilled.get(cause, 0) + tokens
            if usd is not None:
                self.rebilled_usd[cause] = self.rebilled_usd.get(cause, 0.0) + usd

    def as_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "key": self.key,
            "route": self.route,
            "requests": self.requests,
            "input_tokens": self.input_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "hit_rate": self.hit_rate,
            "amplification": self.amplification,
            "rebilled": _ordered(self.rebilled),
            "rebilled_usd": {c: round(v, 12) for c, v in _ordered(self.rebilled_usd).items()},
            **({"cause": self.cause, "diverged_at": self.diverged_at} if self.cause else {}),
        }


def cache_report(
    store: object,
    window: tuple[float, float | None],
    records: Iterable[Mapping[str, Any]],
    per_turn: bool,
    form: str = "text",
) -> str:
    """The `--cache` report's text (`form`: text, json or csv). A store that adds up itself
    does, unless per turn; else `records` (read lazily: then only) are added up here."""
    if not per_turn and isinstance(store, CacheSummed):
        rows = summed_rows(store.cache_sums(*window))
    else:
        rows = cache_rows(records, per_turn)
    if form == "csv":
        return render_csv(rows)
    if not rows and form != "json":
        return "no audit records in that time range"
    return render_cache(rows, form == "json")


def summed_rows(sums: CacheSums) -> list[CacheRow]:
    """`cache_rows` from the database's groups, and the records naming no conversation."""
    groups: dict[tuple[str, str], CacheRow] = {}
    for group in sums.groups:
        route, key, first = group[0], group[1], group[2]
        for scope, name in (("route", route), ("conversation", key)):
            row = groups.setdefault((scope, name), CacheRow(scope, name, route))
            if first < row.first:
                row.first, row.route = first, route
            row.add_group(group)
    for record in sums.unnamed:
        _grouped(groups, record)
    return sorted(groups.values(), key=lambda r: (r.scope != "route", r.route, r.key))


def cache_rows(records: Iterable[Mapping[str, Any]], per_turn: bool) -> list[CacheRow]:
    """Per route then per conversation; or, `per_turn`, one row per record in time order."""
    ordered = sorted(records, key=lambda r: str(r.get("time")))
    if per_turn:
        rows = []
        for record in ordered:
            row = CacheRow("turn", str(record.get("id")), str(record.get("route") or "-"))
            row.add(record)
            rows.append(row)
        return rows
    groups: dict[tuple[str, str], CacheRow] = {}
    for record in ordered:
        _grouped(groups, record)
    return sorted(groups.values(), key=lambda r: (r.scope != "route", r.route, r.key))


def _grouped(groups: dict[tuple[str, str], CacheRow], record: Mapping[str, Any]) -> None:
    """Add `record` to its route's and its conversation's rows."""
    route = str(record.get("route") or "-")
    stamp = record.get("time")
    when = parse_iso(stamp) if isinstance(stamp, str) else float("inf")
    for scope, key in (("route", route), ("conversation", conversation_of(dict(record)))):
        group = groups.setdefault((scope, key), CacheRow(scope, key, route))
        if when < group.first:
            group.first, group.route = when, route
        group.add(record)


def element_text(found: object) -> str | None:
    """`original tools`, `original message 3`, `curated message 3` or `original
    prompt_cache_key` (None: nothing parted)."""
    if not isinstance(found, dict):
        return None
    if found.get("element") in ("tools", "prompt_cache_key"):
        return f"{found.get('prompt')} {found.get('element')}"
    return f"{found.get('prompt')} message {found.get('index')}"


def render_cache(rows: list[CacheRow], as_json: bool) -> str:
    if as_json:
        return orjson.dumps([r.as_dict() for r in rows], option=orjson.OPT_INDENT_2).decode()
    turns = bool(rows) and rows[0].scope == "turn"
    head = ["TURN", "ROUTE", "CAUSE", "PARTED AT"] if turns else ["SCOPE", "KEY", "ROUTE", "REQS"]
    cells = [[*head, "HIT", "WRITTEN", "AMPL", *(c.upper() for c in SPLIT), "REBILLED $"]]
    for row in rows:
        lead = (row.key, row.route, row.cause or "-", row.diverged_at or "-")
        if not turns:
            lead = (row.scope, row.key, row.route, str(row.requests))
        by_cause = [str(row.rebilled.get(c, 0)) for c in SPLIT]
        money = f"{sum(row.rebilled_usd.values()):.4f}" if row.rebilled_usd else "-"
        cells.append([*lead, _ratio(row.hit_rate), str(row.cache_write_tokens)])
        cells[-1] += [_number(row.amplification), *by_cause, money]
    widths = [max(len(line[i]) for line in cells) for i in range(len(cells[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    )


CSV_FIELDS = (
    "scope", "key", "route", "requests", "input_tokens", "cached_tokens", "cache_write_tokens",
    "hit_rate", "amplification",
)  # fmt: skip


def render_csv(rows: list[CacheRow]) -> str:
    """A header line, then a row each: re-billed tokens and dollars a column per cause."""
    names = [*CSV_FIELDS, *(f"rebilled_{c}" for c in SPLIT)]
    names += [*(f"rebilled_usd_{c}" for c in SPLIT), "cause", "diverged_at"]
    out = io.StringIO()
    writer = csv.DictWriter(out, names, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        data = row.as_dict()
        data.update({f"rebilled_{c}": row.rebilled.get(c, 0) for c in SPLIT})
        data.update({f"rebilled_usd_{c}": data["rebilled_usd"].get(c, "") for c in SPLIT})
        writer.writerow(data)
    return out.getvalue().rstrip("\n")


def _ordered(by_cause: dict[str, Any]) -> dict[str, Any]:
    """The causes in `SPLIT` order (any other after), whatever order they were added in."""
    known: dict[str, Any] = {c: by_cause[c] for c in SPLIT if c in by_cause}
    return {**known, **{c: v for c, v in by_cause.items() if c not in known}}


def _pairs(value: object) -> list[tuple[str, float]]:
    if not isinstance(value, dict):
        return []
    return [(str(k), v) for k, v in value.items() if isinstance(v, int | float)]


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
