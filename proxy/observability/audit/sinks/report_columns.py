"""The report's figures of a record, as typed columns beside its `fields` JSON.

`curator report` adds up ~15 values per record. Read from the `fields` JSON, parsing it
was nearly all of a million-record report's 15-19 s; read from columns, the database only
adds (`readers.aggregate_columns`). The sinks write these at insert time from the same
fields they encode, and a migration fills them for older records (`report_backfill`).

Each value is already what `proxy.cli.report.Row.add` adds for the record, so the query
only sums: an integer where the field is a JSON integer (else 0), money as a float where
`cost` is an object (else NULL: a group with no cost at all reports none), the flags 0/1.
A record whose values a column cannot hold (an integer past 64 bits) gets none at all
(`rep_day` NULL), and the report reads its JSON, as it reads every record before these.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

REPORT_COLUMNS = (
    "rep_day",
    "rep_before",
    "rep_after",
    "rep_input",
    "rep_cached",
    "rep_cache_write",
    "rep_output",
    "rep_actual_usd",
    "rep_uncurated_usd",
    "rep_low_usd",
    "rep_high_usd",
    "rep_rescued",
    "rep_skipped",
    "rep_estimated",
)
"""The columns, in the order `report_values` gives them; `rep_day` NULL means unfilled."""
MONEY = frozenset({"rep_actual_usd", "rep_uncurated_usd", "rep_low_usd", "rep_high_usd"})
UNFILLED: tuple[None, ...] = (None,) * len(REPORT_COLUMNS)
_INT64 = 2**63
Values = tuple[Any, ...]


def report_values(time: float, fields: Mapping[str, Any]) -> Values:
    """The record's column values (`REPORT_COLUMNS`), or all NULL if one cannot be held."""
    usage = fields.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    counts = (
        _int(fields.get("tokens_before")),
        _int(fields.get("tokens_after", fields.get("tokens_before"))),
        _int(usage.get("input")),
        _int(usage.get("cached")),
        _int(usage.get("cache_write")) + _int(usage.get("cache_write_1h")),
        _int(usage.get("output")),
    )
    if min(counts) < -_INT64 or max(counts) >= _INT64:
        return UNFILLED
    cost = fields.get("cost")
    money, estimated = _money(cost) if isinstance(cost, dict) else ((None,) * 4, 0)
    rescued = int(bool(fields.get("rescued")))
    skipped = int(fields.get("skip_reason") is not None)
    return (math.floor(time / 86400), *counts, *money, rescued, skipped, estimated)


def _money(cost: Mapping[str, Any]) -> tuple[tuple[float, ...], int]:
    """actual, uncurated, low and high dollars, and whether the range was estimated."""
    figure = _float(cost.get("uncurated_usd"))
    found = cost.get("uncurated_estimate")
    ends = found.get("usd_range") if isinstance(found, dict) else None
    ranged = isinstance(ends, list) and len(ends) == 2
    low, high = (_float(ends[0]), _float(ends[1])) if ranged and ends else (figure, figure)
    return (_float(cost.get("actual_usd")), figure, low, high), int(ranged)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _float(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        # orjson writes a NaN or an infinity as null, which the report reads as 0.0.
        return float(value) if math.isfinite(value) else 0.0
    return 0.0
