"""Terminal rendering for `curator audit`: the list table, one record, and its diff.

Records arrive as plain dicts (the JSONL shape) from either store, so everything here is
defensive about missing or odd fields: an old or masked record must still print.
"""

from __future__ import annotations

import difflib
import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from policies.invariants import is_summary
from policies.messages import shown_text, text_of
from proxy.observability.audit.alignment import common_prefix, curators, match

_COLUMNS = ("TIME", "ID", "KIND", "ROUTE", "POLICY", "MODEL", "STATUS", "TOKENS", "RESULT")
_KEYS = ("time", "id", "kind", "route", "policy", "model", "status")
"""The fields behind the table's first columns; TOKENS and RESULT are derived."""
_SHOW_KEYS = (
    "id", "time", "kind", "parent_id", "route", "policy", "mode", "model", "client", "status",
    "incomplete", "latency_ms", "ttfb_ms", "skip_reason", "redaction",
)  # fmt: skip
DIFF_LINES = 24
RUN_LINES = 3
LINE_WIDTH = 120


def render_table(rows: Sequence[Mapping[str, Any]]) -> str:
    cells = [_COLUMNS, *([_cell(r.get(k)) for k in _KEYS] + [_tokens(r), _result(r)] for r in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(_COLUMNS))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    )


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def _tokens(record: Mapping[str, Any]) -> str:
    before, after = record.get("tokens_before"), record.get("tokens_after")
    if before is None:
        return "-"
    return f"{before} -> {after}" if after is not None and after != before else str(before)


def _result(record: Mapping[str, Any]) -> str:
    if record.get("skip_reason"):
        return f"skipped: {record['skip_reason']}"
    counts: dict[str, int] = {}
    for action in record.get("actions") or ():
        name = str(action.get("curator"))
        counts[name] = counts.get(name, 0) + max(1, len(action.get("indexes") or ()))
    return ",".join(f"{k}={v}" for k, v in counts.items()) or "unchanged"


def render_record(record: Mapping[str, Any]) -> str:
    lines = [f"{key + ':':<16}{_cell(record.get(key))}" for key in _SHOW_KEYS if key in record]
    lines.append(f"{'tokens:':<16}{_tokens(record)}")
    lines.extend(_action_lines(record))
    original, curated = record.get("original") or [], record.get("curated") or []
    lines.append(f"original messages ({len(original)}):")
    lines.extend(line for i, m in enumerate(original) for line in _message_lines(i, m))
    if curated == original:
        lines.append("curated messages: the same as the original")
    else:
        lines.append(f"curated messages ({len(curated)}):")
        lines.extend(line for i, m in enumerate(curated) for line in _message_lines(i, m))
    response = record.get("response")
    if isinstance(response, Mapping):
        usage = orjson.dumps(response.get("usage")).decode()
        lines.append(f"response (finish: {response.get('finish_reason')}, usage: {usage}):")
        lines.extend(_indent(str(response.get("text") or ""), 4))
        lines.extend(_call_lines(response.get("tool_calls"), 4))
    if record.get("error") is not None:
        lines.append("error: " + orjson.dumps(record["error"]).decode())
    return "\n".join(lines)


def _action_lines(record: Mapping[str, Any]) -> list[str]:
    actions = record.get("actions") or []
    lines = ["actions:"] if actions else []
    for a in actions:
        indexes = ", ".join(str(i) for i in a.get("indexes") or ())
        lines.append(
            f"  {a.get('curator')} {a.get('kind')} [{indexes}] "
            f"-{a.get('tokens_removed')} tokens: {a.get('reason')}"
        )
    return lines


def _message_lines(index: int, msg: Any) -> list[str]:
    if not isinstance(msg, Mapping):
        return [f"  [{index}] {msg!r}"]
    extra = "".join(f" {k}={msg[k]}" for k in ("name", "tool_call_id") if msg.get(k))
    lines = [f"  [{index}] {msg.get('role')}{extra}:"]
    lines.extend(_indent(shown_text(msg), 6))
    content = msg.get("content")
    for part in content if isinstance(content, list) else ():
        if isinstance(part, Mapping) and part.get("type") != "text":
            lines.append(f"      [{part.get('type')} part]")
    lines.extend(_call_lines(msg.get("tool_calls"), 6))
    return lines


def _call_lines(calls: object, width: int) -> list[str]:
    out = []
    for call in calls if isinstance(calls, list) else ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping):
            call_id = call.get("id") or "-"
            out.append(f"{' ' * width}-> {fn.get('name')}({fn.get('arguments')}) id={call_id}")
    return out


def _indent(text: str, width: int) -> list[str]:
    return [" " * width + line for line in text.splitlines()]


def render_diff(record: Mapping[str, Any]) -> str:
    original, curated = record.get("original") or [], record.get("curated") or []
    head = f"{record.get('id')}  route={record.get('route')}  policy={record.get('policy')}"
    lines = [head, f"tokens {_tokens(record)}, messages {len(original)} -> {len(curated)}"]
    if record.get("skip_reason"):
        lines.append(f"curation was skipped: {record['skip_reason']}")
    lines.extend(_action_lines(record))
    blame, matched = match(record)
    changed = 0
    for i, msg in enumerate(original):
        j = matched.get(i)
        if j is not None and curated[j] == msg:
            continue
        changed += 1
        who = f"  by {', '.join(curators(blame[i]))}" if blame.get(i) else ""
        role = f"[{i}] {msg.get('role') if isinstance(msg, Mapping) else '?'}"
        if j is None:
            lines.append(f"  {role:<16} dropped    {_size(msg)} chars{who}")
            continue
        lines.append(f"  {role:<16} shortened  {_size(msg)} -> {_size(curated[j])} chars{who}")
        lines.extend(_text_diff(shown_text(msg), shown_text(curated[j]), i, j))
    for j in sorted(set(range(len(curated))) - set(matched.values())):
        kind = "summary" if is_summary(curated[j]) else "message"
        lines.append(f"  {kind} inserted as curated[{j}]: {_size(curated[j])} chars")
    lines.append(f"{len(original) - changed} of {len(original)} messages unchanged")
    return "\n".join(lines)


def _size(msg: Any) -> int:
    if not isinstance(msg, Mapping):
        return len(str(msg))
    calls = msg.get("tool_calls")
    args = sum(
        len(str((c.get("function") or {}).get("arguments") or ""))
        for c in (calls if isinstance(calls, list) else ())
        if isinstance(c, Mapping)
    )
    return len(text_of(msg)) + args


def _text_diff(before: str, after: str, i: int, j: int) -> list[str]:
    if before == after:
        return ["      (text unchanged; tool calls differ)"]
    head = common_prefix(before, after)
    tail = common_prefix(before[head:][::-1], after[head:][::-1])
    lines = [f"      kept the first {head} and the last {tail} chars"]
    diff = list(
        difflib.unified_diff(
            before.splitlines(),
            after.splitlines(),
            f"original[{i}]",
            f"curated[{j}]",
            n=1,
            lineterm="",
        )
    )
    shown = diff[:2] + _compact(diff[2:])
    for line in shown[:DIFF_LINES]:
        cut = line if len(line) <= LINE_WIDTH else line[: LINE_WIDTH - 3] + "..."
        lines.append("      " + cut)
    if len(shown) > DIFF_LINES:
        lines.append(f"      ... {len(shown) - DIFF_LINES} more diff lines")
    return lines


def _compact(diff: list[str]) -> list[str]:
    """Long runs of removed, added or context lines shortened to their first few."""
    out: list[str] = []
    for mark, group in itertools.groupby(diff, key=lambda line: line[:1]):
        run = list(group)
        if mark in "-+ " and len(run) > RUN_LINES + 1:
            out.extend(run[:RUN_LINES])
            out.append(f"{mark}... {len(run) - RUN_LINES} more lines")
        else:
            out.extend(run)
    return out
