"""`curator report`'s totals on PostgreSQL, added up by the database: the GROUP BY of
`readers.aggregate` (SQLite's) in PostgreSQL's JSON terms, the same sums under the same
rules (`proxy.cli.report.Row.add`; a test compares all three on one store).

Each record's `fields` are parsed once, as `jsonb` (`OFFSET 0` keeps the planner from
pasting the parse into each of its ~40 uses: that took 255 s for a million records).
jsonb refuses the escape `\\u0000` (a NUL a client sent may sit in a response text): it
becomes `\\ufffd` first, a swap of six characters for six that keeps the JSON valid wherever
it occurs (after an escaped backslash too), and touches no number the sums read.
"""

from __future__ import annotations

from typing import LiteralString

_J = "j"


def _at(*path: str) -> str:
    return f"{_J} #> '{{{','.join(path)}}}'"


def _text(*path: str) -> str:
    return f"{_J} #>> '{{{','.join(path)}}}'"


def _int(*path: str) -> str:
    """A JSON integer (not a float, not a bool) at `path`, else 0: `report._int` (jsonb
    keeps a number's scale: `3.0` has one digit after the point, so it is no integer)."""
    number = f"jsonb_typeof({_at(*path)}) = 'number'"
    return (
        f"CASE WHEN {number} AND scale(({_at(*path)})::numeric) = 0 "
        f"THEN ({_at(*path)})::numeric ELSE 0 END"
    )


def _num(*path: str) -> str:
    """A JSON number at `path`, else 0.0: `report._float`."""
    number = f"jsonb_typeof({_at(*path)}) = 'number'"
    return f"CASE WHEN {number} THEN ({_at(*path)})::float8 ELSE 0.0 END"


_COST = f"jsonb_typeof({_at('cost')}) = 'object'"
_RANGE = ("cost", "uncurated_estimate", "usd_range")
_RANGED = f"jsonb_typeof({_at(*_RANGE)}) = 'array' AND jsonb_array_length({_at(*_RANGE)}) = 2"
_TRUTHY = f"""CASE jsonb_typeof({_at("rescued")})
      WHEN 'boolean' THEN {_text("rescued")} = 'true'
      WHEN 'number' THEN ({_text("rescued")})::numeric <> 0
      WHEN 'string' THEN {_text("rescued")} <> ''
      WHEN 'array' THEN jsonb_array_length({_at("rescued")}) > 0
      WHEN 'object' THEN {_at("rescued")} <> '{{}}'::jsonb
      ELSE false END"""
_TOKENS_AFTER = (
    f"CASE WHEN {_J} ? 'tokens_after' THEN {_int('tokens_after')} ELSE {_int('tokens_before')} END"
)
_GROUPS = f"""
SELECT coalesce(nullif(route, ''), '-'), coalesce(nullif(policy, ''), '-'),
  coalesce(nullif(model, ''), '-'),
  to_char(to_timestamp(floor(time / 86400) * 86400) AT TIME ZONE 'UTC', 'YYYY-MM-DD'),
  count(*),
  sum({_int("tokens_before")}), sum({_TOKENS_AFTER}),
  sum({_int("usage", "input")}), sum({_int("usage", "cached")}),
  sum({_int("usage", "cache_write")} + {_int("usage", "cache_write_1h")}),
  sum({_int("usage", "output")}),
  sum(CASE WHEN {_COST} THEN {_num("cost", "actual_usd")} END),
  sum(CASE WHEN {_COST} THEN {_num("cost", "uncurated_usd")} END),
  sum(CASE WHEN ({_TRUTHY}) THEN 1 ELSE 0 END),
  sum(CASE WHEN coalesce(jsonb_typeof({_at("skip_reason")}) <> 'null', false) THEN 1 ELSE 0 END),
  sum(CASE WHEN {_COST} AND {_RANGED} THEN 1 ELSE 0 END),
  sum(CASE WHEN {_COST} THEN CASE WHEN {_RANGED} THEN {_num(*_RANGE, "0")}
      ELSE {_num("cost", "uncurated_usd")} END END),
  sum(CASE WHEN {_COST} THEN CASE WHEN {_RANGED} THEN {_num(*_RANGE, "1")}
      ELSE {_num("cost", "uncurated_usd")} END END)
FROM (SELECT time, route, policy, model,
        replace(convert_from(fields, 'UTF8'), '\\u0000', '\\ufffd')::jsonb AS {_J}
      FROM audit_records WHERE time >= %s AND time < %s AND kind <> 'summarizer'
      OFFSET 0) AS r
GROUP BY 1, 2, 3, floor(time / 86400)
"""
POSTGRES_GROUPS: LiteralString = _GROUPS
"""The statement: parameters since and until (epoch seconds); rows as `aggregate.GroupRow`
once `aggregate.row` has typed them."""
