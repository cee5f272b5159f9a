"""Secret redaction for audit records, in time linear in the input.

The detectors (`proxy.observability.audit.detectors`) each cost one pass over a text, and
run at all only when one of their literal needles occurs in it (and their gate, if they
have one, finds something).

Text inside JSON strings (tool-call arguments, JSON tool results) hides secrets behind
escapes: a PEM key's lines are joined by a literal backslash-n, a key may be spelled with
`\\u00XX`. Text containing backslashes is therefore also scanned in decoded form and the
spans found there are mapped back onto the original, which is what gets rewritten.

A secret can also hide in the seams of a structure: split across the text parts of one
message (which the model reads joined), or used as a JSON object key. Both are redacted.
"""

from __future__ import annotations

import bisect
import copy
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from proxy.observability.audit import windows
from proxy.observability.audit.detectors import BUILTIN, NAME, Detector, custom_detector, min_width
from proxy.observability.audit.pieces import Known, piece_spans

__all__ = ["BUILTIN", "MASK", "NAME", "Detector", "Redactor", "custom_detector", "mask"]

MASK = "[REDACTED:redaction_failed]"
_PLAIN_KEY = re.compile(r"[a-z_]{1,40}")
"""A key that is a plain word (role, content, ...): kept when masking, no secret looks so."""

_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_SIMPLE_ESCAPES = {
    '"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
}  # fmt: skip
_UNESCAPE_DEPTH = 2
"""Decode JSON escapes this many times: a JSON string inside a JSON string inside a message."""

SHORT_TEXT = 64
"""Texts up to this long are remembered once redacted (`Redactor._short`)."""
SHORT_TEXTS_MAX = 4096
_LEAVES = frozenset({type(None), bool, int, float})
Span = tuple[int, int, int]
"""(start, end, detector index) of a secret in some text."""


class Redactor:
    """Replaces secrets with `[REDACTED:<detector>]` in text and in JSON-like values."""

    __slots__ = ("_far", "_known", "_labels", "_min_len", "_needles", "_short", "detectors")

    def __init__(self, detectors: Sequence[Detector]) -> None:
        self.detectors = tuple(detectors)
        self._labels = tuple(f"[REDACTED:{d.name}]" for d in self.detectors)
        widths = [min_width(d.pattern) for d in self.detectors]
        self._min_len = min((w or 0 for w in widths), default=0)
        """Text shorter than this holds no secret (most strings of a record: ids, names)."""
        needles = {n for d in self.detectors for n in d.needles}
        gated = all(d.needles for d in self.detectors)
        self._needles = (
            re.compile("|".join(map(re.escape, sorted(needles)))) if gated and needles else None
        )
        """Every needle in one pattern, when every detector has some: one search tells
        whether any detector needs to run at all."""
        patterns = (self._needles, *(p for d in self.detectors for p in (d.pattern, d.gate)))
        self._far = [windows.reach(p) if p is not None else None for p in patterns]
        """`windows.reach` of the needles, then of each detector's pattern and gate."""
        self._known: Known = ()
        """Secrets found elsewhere whose pieces are redacted too (see `with_known`)."""
        self._short: dict[str, str] = {}
        """Short texts already redacted: keys, roles, finish reasons and model names come
        back in every record (bounded; a redactor serves one thread)."""

    @classmethod
    def build(cls, *, builtin: bool = True, custom: Sequence[Detector] = ()) -> Redactor:
        return cls([*(BUILTIN if builtin else ()), *custom])

    def text(self, text: str) -> str:
        if len(text) < self._min_len:
            return text
        if len(text) > SHORT_TEXT:
            spans = self._find(text, _UNESCAPE_DEPTH)
            return self._cut([text], spans)[0] if spans else text
        clean = self._short.get(text)
        if clean is None:
            if len(self._short) >= SHORT_TEXTS_MAX:
                self._short.clear()
            spans = self._find(text, _UNESCAPE_DEPTH)
            clean = self._short[text] = self._cut([text], spans)[0] if spans else text
        return clean

    def found(self, values: Iterable[object]) -> Known:
        """Every secret in the strings (and keys) of `values`, as found there."""
        known: dict[str, int] = {}
        for text in _strings(values):
            if len(text) >= self._min_len:
                known.update((text[s:e], w) for s, e, w in self._find(text, _UNESCAPE_DEPTH))
        return tuple(known.items())

    def with_known(self, known: Known) -> Redactor:
        """This redactor, also removing the beginnings and ends of `known` secrets."""
        twin = copy.copy(self)
        twin._known = known
        twin._short = {}  # the pieces of `known` change what a text redacts to
        return twin

    def value(self, value: object) -> Any:
        """Redact every string inside dicts, lists and tuples, keys included."""
        if type(value) in _LEAVES:  # first: the ABC check below costs more than the walk
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict | Mapping):  # a dict is found without the ABC
            return self._mapping(value, None)
        if isinstance(value, list | tuple):
            if len(value) > 1:
                joined = self._text_parts(value)
                if joined is not None:
                    return joined
            return [self.value(v) for v in value]
        return value

    def _mapping(self, value: Mapping[Any, Any], text: str | None) -> dict[Any, Any]:
        """`value` redacted; with `text`, that (already redacted) replaces its "text"."""
        out: dict[Any, Any] = {}
        for key, item in value.items():
            clean = self.text(key) if type(key) is str else key
            if clean in out:  # two keys redacted alike: keep both entries
                clean = _unique(clean, out)
            out[clean] = text if text is not None and key == "text" else self.value(item)
        return out

    def _text_parts(self, items: Sequence[object]) -> list[Any] | None:
        """Content parts (`{"type": "text", "text": ...}`) redacted as the one text the
        model reads: a secret split between two parts is found. None if fewer than two."""
        where = [
            i
            for i, item in enumerate(items)
            if isinstance(item, Mapping) and type(item.get("text")) is str
        ]
        if len(where) < 2:
            return None
        texts: list[str] = [items[i]["text"] for i in where]  # type: ignore[index]
        spans = self._find("".join(texts), _UNESCAPE_DEPTH)
        offset = 0
        for text in texts:  # a part on its own: a token at its start has an edge there
            spans.extend(
                (s + offset, e + offset, w) for s, e, w in self._find(text, _UNESCAPE_DEPTH)
            )
            offset += len(text)
        clean = dict(zip(where, self._cut(texts, spans) if spans else texts, strict=True))
        return [
            self._mapping(item, clean[i]) if i in clean else self.value(item)  # type: ignore[arg-type]
            for i, item in enumerate(items)
        ]

    def _cut(self, texts: Sequence[str], spans: list[Span]) -> list[str]:
        """`texts` with every span of their concatenation removed; each span's label goes
        where it starts."""
        merged = _merge(spans)
        out: list[str] = []
        first = start = 0
        for text in texts:
            end = start + len(text)
            while first < len(merged) and merged[first][1] <= start:
                first += 1
            pieces: list[str] = []
            pos = 0
            for s, e, which in merged[first:]:
                if s >= end:
                    break
                if s >= start:
                    pieces += (text[pos : s - start], self._labels[which])
                pos = max(pos, min(e, end) - start)
            pieces.append(text[pos:])
            out.append("".join(pieces))
            start = end
        return out

    def _find(self, text: str, depth: int) -> list[Span]:
        spans = self._scan(text)
        if self._known:
            spans.extend(piece_spans(text, self._known))
        if depth and "\\" in text:
            view = _Unescaped.of(text)
            if view is not None:
                spans.extend(view.to_original(s) for s in self._find(view.text, depth - 1))
        return spans

    def _scan(self, text: str) -> list[Span]:
        """Every detector's matches; a long text a window at a time (`windows`)."""
        spans: list[Span] = []
        if self._needles is not None and not windows.search(self._needles, text, self._far[0]):
            return spans
        for which, det in enumerate(self.detectors):
            if det.needles and not any(windows.contains(text, n) for n in det.needles):
                continue
            far, gate_far = self._far[1 + 2 * which : 3 + 2 * which]
            if det.gate is not None and not windows.search(det.gate, text, gate_far):
                continue
            for match in windows.finditer(det.pattern, text, far):
                start, end = match.span(det.group)
                if start == end or (det.accept is not None and not det.accept(text[start:end])):
                    continue
                spans.append((start, end, which))
        return spans


def _strings(values: Iterable[object]) -> Iterator[str]:
    for value in values:
        if isinstance(value, str):
            yield value
        elif isinstance(value, Mapping):
            yield from (k for k in value if isinstance(k, str))
            yield from _strings(value.values())
        elif isinstance(value, list | tuple):
            yield from _strings(value)


def _unique(key: str, taken: Mapping[Any, Any]) -> str:
    n = 2
    while f"{key}#{n}" in taken:
        n += 1
    return f"{key}#{n}"


def mask(value: object) -> Any:
    """Every string (and anything not JSON-like) replaced by the failure marker; keys too,
    unless they are plain words."""
    if isinstance(value, Mapping):
        return {_mask_key(k, i): mask(v) for i, (k, v) in enumerate(value.items())}
    if isinstance(value, list | tuple):
        return [mask(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return MASK


def _mask_key(key: object, index: int) -> object:
    if isinstance(key, str) and _PLAIN_KEY.fullmatch(key):
        return key
    return f"{MASK}#{index}"


def _merge(spans: list[Span]) -> list[Span]:
    """Overlapping spans become one, named after the earliest (then longest, then first) one."""
    spans.sort(key=lambda s: (s[0], -s[1], s[2]))
    merged: list[Span] = []
    for start, end, which in spans:
        if merged and start < merged[-1][1]:
            last = merged[-1]
            merged[-1] = (last[0], max(last[1], end), last[2])
        else:
            merged.append((start, end, which))
    return merged


@dataclass(frozen=True, slots=True)
class _Unescaped:
    """Text with its JSON escapes decoded, and the way back to the original offsets."""

    text: str
    positions: list[int]
    """Decoded index of each escape, ascending."""
    extra: list[int]
    """Original chars beyond one, summed over the escapes up to and including each."""

    @classmethod
    def of(cls, text: str) -> _Unescaped | None:
        pieces: list[str] = []
        positions: list[int] = []
        extra: list[int] = []
        last = decoded = total = 0
        for match in _ESCAPE.finditer(text):
            literal = text[last : match.start()]
            pieces.append(literal)
            decoded += len(literal)
            code, simple = match.groups()
            pieces.append(chr(int(code, 16)) if code else _SIMPLE_ESCAPES[simple])
            positions.append(decoded)
            total += match.end() - match.start() - 1
            extra.append(total)
            decoded += 1
            last = match.end()
        if not positions:
            return None
        pieces.append(text[last:])
        return cls("".join(pieces), positions, extra)

    def original(self, index: int) -> int:
        before = bisect.bisect_left(self.positions, index)
        return index + (self.extra[before - 1] if before else 0)

    def to_original(self, span: Span) -> Span:
        return self.original(span[0]), self.original(span[1]), span[2]
