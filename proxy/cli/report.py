"""`curator report`: what curation did and what it cost, from the audit store.

One row per route, policy, model and day (UTC): requests, prompt tokens before and after
curation, the real cache hit ratio (cached over input tokens, as the upstream reported
them), the tokens written to the prompt cache, actual versus uncurated spend and the net
savings, rescues and skips. With
`--conversation KEY`, one row per request of that conversation instead: its token and cache
curve across turns. A text table by default, `--json` or `--csv` for machines.

Money and cache figures exist only for records written by a proxy that reads usage
(`usage`, `cost` fields); older records count as requests with unknown spend ("-").
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import orjson

from proxy.cli.audit import UsageError, conversation_of, handled_as, open_store
from proxy.cli.report_cache import cache_report
from proxy.observability.audit.metadata import SUMMARIZER
from proxy.observability.audit.readers.base import Aggregating
from proxy.observability.audit.readers.query import time_window
from proxy.observability.audit.readers.registry import READERS

DEFAULT_SINCE = "7d"


@dataclass(slots=True)
class Row:
    """Totals over a group of chat records (or one record, per conversation turn)."""

    route: str
    policy: str
    model: str
    day: str
    requests: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    """Written to the prompt cache (5-minute and 1-hour), a part of `input_tokens`."""
    output_tokens: int = 0
    actual_usd: float | None = None
    uncurated_usd: float | None = None
    rescues: int = 0
    skips: int = 0
    estimated: int = 0
    """Records whose uncurated cost is an estimate (encrypted reasoning priced by size)."""
    uncurated_low_usd: float | None = None
    uncurated_high_usd: float | None = None
    """The uncurated cost's range: each estimate's ends, each exact figure as itself."""
    id: str | None = None
    """Per-turn rows only: the record's id."""

    @property
    def cache_hit_ratio(self) -> float | None:
        return self.cached_tokens / self.input_tokens if self.input_tokens else None

    @property
    def savings_usd(self) -> float | None:
        if self.actual_usd is None or self.uncurated_usd is None:
            return None
        return self.uncurated_usd - self.actual_usd

    def add(self, record: Mapping[str, Any]) -> None:
        self.requests += 1
        self.tokens_before += _int(record.get("tokens_before"))
        self.tokens_after += _int(record.get("tokens_after", record.get("tokens_before")))
        usage = record.get("usage")
        if isinstance(usage, dict):
            self.input_tokens += _int(usage.get("input"))
            self.cached_tokens += _int(usage.get("cached"))
            self.cache_write_tokens += _int(usage.get("cache_write"))
            self.cache_write_tokens += _int(usage.get("cache_write_1h"))
            self.output_tokens += _int(usage.get("output"))
        cost = record.get("cost")
        if isinstance(cost, dict):
            self.actual_usd = (self.actual_usd or 0.0) + _float(cost.get("actual_usd"))
            self.uncurated_usd = (self.uncurated_usd or 0.0) + _float(cost.get("uncurated_usd"))
            self._add_range(cost)
        self.skips += record.get("skip_reason") is not None
        self.rescues += bool(record.get("rescued"))

    def _add_range(self, cost: Mapping[str, Any]) -> None:
        figure = _float(cost.get("uncurated_usd"))
        low, high = figure, figure
        found = cost.get("uncurated_estimate")
        ends = found.get("usd_range") if isinstance(found, dict) else None
        if isinstance(ends, list) and len(ends) == 2:
            self.estimated += 1
            low, high = _float(ends[0]), _float(ends[1])
        self.uncurated_low_usd = (self.uncurated_low_usd or 0.0) + low
        self.uncurated_high_usd = (self.uncurated_high_usd or 0.0) + high

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.id is None:
            del data["id"]
        return {**data, "cache_hit_ratio": self.cache_hit_ratio, "savings_usd": self.savings_usd}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `report` to the `curator` CLI's subcommands."""
    report = commands.add_parser(
        "report",
        help="requests, tokens, cache hits and money per route, policy, model and day",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    report.add_argument("--config", help="config file whose audit: section names the store")
    report.add_argument(
        "--path",
        "--db",
        dest="path",
        help="audit store: a .db or .jsonl file, or a postgresql:// URL; overrides --config",
    )
    report.add_argument(
        "--sink", choices=sorted(READERS), help="which store --path is (default: by its name)"
    )
    report.add_argument("--since", default=DEFAULT_SINCE, help="ISO time or duration ago (7d)")
    report.add_argument("--until", help="ISO time, or a duration ago (default: now)")
    report.add_argument("--conversation", help="one row per request of this conversation key")
    report.add_argument(
        "--cache",
        action="store_true",
        help="why the cache missed: hit rate, re-billed tokens and $ by cause, write "
        "amplification, per route and conversation (per turn with --conversation)",
    )
    output = report.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="a JSON array of rows")
    output.add_argument("--csv", action="store_true", help="CSV with a header line")
    report.set_defaults(handler=run)


@handled_as("report")
def run(args: argparse.Namespace) -> int:
    """`curator report`: print the rows; a bad store or time is one line on stderr, exit 1."""
    try:
        since, until = time_window(args.since, args.until)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    with open_store(args) as store:
        if args.cache:
            records = client_records(store.between(since, until), args.conversation)
            form = "json" if args.json else "csv" if args.csv else "text"
            text = cache_report(store, (since, until), records, bool(args.conversation), form)
            sys.stdout.write(text + "\n")
            return 0
        if isinstance(store, Aggregating):
            # The database adds up; a conversation's records come without their messages.
            if args.conversation:
                rows = turns(store.conversation_fields(args.conversation, since, until))
            else:
                rows = sorted_rows(Row(*g) for g in store.grouped(since, until))
        else:
            records = client_records(store.between(since, until), args.conversation)
            rows = turns(records) if args.conversation else grouped(records)
    if args.json:
        text = orjson.dumps([r.as_dict() for r in rows], option=orjson.OPT_INDENT_2).decode()
    elif args.csv:
        text = render_csv(rows)
    else:
        text = render_text(rows) if rows else "no audit records in that time range"
    sys.stdout.write(text.rstrip("\n") + "\n")
    return 0


def client_records(
    records: Iterable[dict[str, Any]], conversation: str | None
) -> Iterator[dict[str, Any]]:
    """The clients' records (not summarizer calls), of one conversation if one is named."""
    for record in records:
        if record.get("kind") == SUMMARIZER:
            continue
        if conversation is not None and not conversation_of(record).startswith(conversation):
            continue
        yield record


def grouped(records: Iterable[Mapping[str, Any]]) -> list[Row]:
    """One row per (route, policy, model, day), sorted by day then names."""
    rows: dict[tuple[str, str, str, str], Row] = {}
    for record in records:
        key = (*_names(record), _day(record))
        row = rows.get(key)
        if row is None:
            row = rows[key] = Row(*key)
        row.add(record)
    return sorted_rows(rows.values())


def sorted_rows(rows: Iterable[Row]) -> list[Row]:
    """By day, then route, policy and model."""
    return sorted(rows, key=lambda r: (r.day, r.route, r.policy, r.model))


def turns(records: Iterable[Mapping[str, Any]]) -> list[Row]:
    """One row per record, in time order: a conversation's curve."""
    rows = []
    for record in sorted(records, key=lambda r: str(r.get("time"))):
        row = Row(*_names(record), str(record.get("time") or "-"), id=str(record.get("id")))
        row.add(record)
        rows.append(row)
    return rows


def _names(record: Mapping[str, Any]) -> tuple[str, str, str]:
    route, policy, model = (str(record.get(k) or "-") for k in ("route", "policy", "model"))
    return route, policy, model


def _day(record: Mapping[str, Any]) -> str:
    stamp = record.get("time")
    return stamp[:10] if isinstance(stamp, str) else "-"


COLUMNS = (
    ("DAY", "day"), ("ROUTE", "route"), ("POLICY", "policy"), ("MODEL", "model"),
    ("REQS", "requests"), ("BEFORE", "tokens_before"), ("AFTER", "tokens_after"),
    ("CACHE", "cache_hit_ratio"), ("WRITTEN", "cache_write_tokens"), ("ACTUAL $", "actual_usd"),
    ("UNCURATED $", "uncurated_usd"), ("SAVED $", "savings_usd"), ("RESCUES", "rescues"),
    ("SKIPS", "skips"),
)  # fmt: skip


def render_text(rows: list[Row]) -> str:
    """An aligned table; a conversation's rows show the time and id instead of the day."""
    columns = list(COLUMNS)
    if rows and rows[0].id is not None:
        columns[0] = ("TIME", "day")
        columns.insert(1, ("ID", "id"))
    cells = [[title for title, _ in columns]]
    cells += [[_text(row.as_dict().get(key), key) for _, key in columns] for row in rows]
    for line, row in zip(cells[1:], rows, strict=True):
        if row.estimated:
            at = next(i for i, (_, key) in enumerate(columns) if key == "uncurated_usd")
            low, high = _text(row.uncurated_low_usd, "_usd"), _text(row.uncurated_high_usd, "_usd")
            line[at] = f"~{line[at]} [{low}-{high}]"
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    table = "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    )
    if any(row.estimated for row in rows):
        table += "\n" + ESTIMATE_NOTE
    return table


ESTIMATE_NOTE = (
    "~ an estimate: encrypted reasoning is priced by its size, learned from the upstream's"
    " input tokens where it reported them; [low-high] is its range"
)


def render_csv(rows: list[Row]) -> str:
    names = [f.name for f in fields(Row) if f.name != "id"] + ["cache_hit_ratio", "savings_usd"]
    if rows and rows[0].id is not None:
        names.insert(0, "id")
    out = io.StringIO()
    writer = csv.DictWriter(out, names, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row.as_dict())
    return out.getvalue()


def _text(value: object, key: str) -> str:
    if value is None:
        return "-"
    if key == "cache_hit_ratio" and isinstance(value, float):
        return f"{value:.1%}"
    if key.endswith("_usd") and isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _float(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return 0.0
