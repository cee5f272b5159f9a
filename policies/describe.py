"""Cheap, deterministic descriptions of contents, for the placeholders curators leave.

A placeholder stands in for content a curator removed. It names what was there (so the
model knows it existed and can ask for it again) and is a function of that content alone:
the same message becomes the same bytes on every turn, so providers' prompt caches hold.
Detection reads the text once with simple patterns: no I/O, no randomness, and it never
raises, whatever the input.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

_DATA_URL = re.compile(r"data:([\w.+-]{1,64}/[\w.+-]{1,64})?[^,]{0,200},")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
_WHITESPACE = re.compile(r"\s+")
_BINARY = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffd]")
_TIMESTAMP = r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d|\b\d\d:\d\d:\d\d\b"
_LEVEL = r"\b(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|FATAL|CRITICAL)\b"
_LOG_LINE = re.compile(f"{_TIMESTAMP}|{_LEVEL}")
_LOG_ERROR = re.compile(r"\b(?:ERROR|FATAL|CRITICAL|FAILED|Traceback)\b")
_CODE_LINE = re.compile(
    r"^\s*(?:def |class |import |from \S+ import |return\b|if\b.*[:{]\s*$|for\b.*[:{]\s*$"
    r"|#include\b|function\b|const |let |var |public |private |package |fn |func |@\w)"
    r"|[;{}]\s*$|^\s*[)\]}]"
)
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}")
_NUMBERED = re.compile(r"^\s*\d+\t")
_SEARCH_HIT = re.compile(r"^([^\s:]+):\d+:")
_TEST_SUMMARY = re.compile(r"^=+ (.*\b(?:passed|failed|errors?)\b.*?) in [\d.]+s\b.*=+$")
_SUMMARY_MAX_CHARS = 200
_LINE_SHARE = 0.3
"""Share of lines that must look like log (or code) lines for the text to count as such."""
_TABLE_SHARE = 0.8


def size_label(n_bytes: int) -> str:
    """A short human size: `512 B`, `18 KB`, `1.2 MB` (1 KB = 1024 bytes)."""
    if n_bytes < 1024:
        return f"{n_bytes} B"
    if n_bytes < 1024 * 1024:
        return f"{round(n_bytes / 1024):,} KB"
    return f"{n_bytes / (1024 * 1024):,.1f} MB"


def strings(value: object) -> Iterator[str]:
    """Every string inside a JSON-like value (a content, a part, a list of parts)."""
    # A stack, not recursion: a client can nest parts deeper than Python recurses.
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def content_chars(content: object) -> int:
    """Characters a content carries: its text, plus image URLs and other part data."""
    return sum(len(s) for s in strings(content))


def content_bytes(content: object) -> int:
    # An ASCII string's UTF-8 size is its length; isascii() is a flag CPython keeps.
    if isinstance(content, str) and content.isascii():
        return len(content)
    return sum(len(s.encode("utf-8", "surrogatepass")) for s in strings(content))


def describe(content: object) -> str:
    """`kind: details, ~size`, e.g. `table: 120 rows, ~18 KB` or `json: array of 3 items, ~2 KB`."""
    size = "~" + size_label(content_bytes(content))
    if isinstance(content, str):
        return f"{describe_text(content)}, {size}"
    parts = [p for p in content if isinstance(p, Mapping)] if isinstance(content, list) else []
    texts = [p["text"] for p in parts if isinstance(p.get("text"), str)]
    images = sum(1 for p in parts if p.get("type") == "image_url")
    others = len(parts) - len(texts) - images
    found = [describe_text("".join(texts))] if texts else []
    found += [_count(n, noun) for n, noun in ((images, "image"), (others, "other part")) if n]
    return f"{' + '.join(found) or 'empty content'}, {size}"


def describe_text(text: str) -> str:
    """The kind of a text and its vital statistics, without its size."""
    stripped = text.strip()
    url = _DATA_URL.match(stripped)
    if url:
        mime = url.group(1) or "data"
        return f"image: {mime} data URL" if mime.startswith("image/") else f"data URL: {mime}"
    found = _json(stripped)
    if found is not None:
        return found
    if len(_BINARY.findall(text)) > len(text) * 0.05:
        return "binary data"
    compact = _WHITESPACE.sub("", stripped)
    if len(compact) >= 64 and len(compact) >= 0.95 * len(stripped) and _BASE64.fullmatch(compact):
        return "base64 blob"
    lines = [line for line in text.splitlines() if line.strip()]
    return _line_kind(lines) or _plain(text, lines)


def _json(stripped: str) -> str | None:
    if stripped[:1] not in ("{", "["):
        return None
    try:
        value: Any = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, dict):
        return f"json: object with {_count(len(value), 'key')}"
    if isinstance(value, list):
        return f"json: array of {_count(len(value), 'item')}"
    return None


def _line_kind(lines: list[str]) -> str | None:
    """What a multi-line text is when enough of its lines agree; None for prose."""
    if len(lines) < 3:
        return None
    if _share(lines, _NUMBERED) >= _TABLE_SHARE:  # `cat -n`: judge the listed lines
        lines = [line[m.end() :] if (m := _NUMBERED.match(line)) else line for line in lines]
    summary = next((m.group(1) for line in lines[-5:] if (m := _test_summary(line))), None)
    if summary is not None:
        return f"test output: {_count(len(lines), 'line')}, {summary}"
    hits = [m.group(1) for line in lines if (m := _SEARCH_HIT.match(line))]
    if len(hits) >= _TABLE_SHARE * len(lines):
        return f"search hits: {_count(len(hits), 'line')} in {_count(len(set(hits)), 'file')}"
    rows = _table_rows(lines)
    if rows is not None:
        return f"table: {_count(rows, 'row')}"
    if _share(lines, _LOG_LINE) >= _LINE_SHARE:
        errors = sum(1 for line in lines if _LOG_ERROR.search(line))
        suffix = f", {_count(errors, 'error line')}" if errors else ""
        return f"log: {_count(len(lines), 'line')}{suffix}"
    if _share(lines, _CODE_LINE) >= _LINE_SHARE:
        return f"code: {_count(len(lines), 'line')}"
    return None


def _test_summary(line: str) -> re.Match[str] | None:
    # Only short lines: the pattern backtracks, and a pytest summary line is short.
    return _TEST_SUMMARY.match(line) if len(line) <= _SUMMARY_MAX_CHARS else None


def _share(lines: list[str], pattern: re.Pattern[str]) -> float:
    return sum(1 for line in lines if pattern.search(line)) / len(lines)


def _table_rows(lines: list[str]) -> int | None:
    """Data rows of a markdown, TSV, CSV or semicolon table; None when it is not one."""
    piped = [line for line in lines if line.lstrip().startswith("|")]
    if len(piped) >= _TABLE_SHARE * len(lines):
        separators = sum(1 for line in piped if _TABLE_SEPARATOR.match(line))
        return len(piped) - 2 * separators if separators else len(piped)
    for delimiter, least in (("\t", 1), (",", 2), (";", 2)):
        ((common, rows),) = Counter(line.count(delimiter) for line in lines).most_common(1)
        if common >= least and rows >= _TABLE_SHARE * len(lines):
            return len(lines)
    return None


def _plain(text: str, lines: list[str]) -> str:
    return f"text: {_count(len(lines), 'line')}, {_count(len(text.split()), 'word')}"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
