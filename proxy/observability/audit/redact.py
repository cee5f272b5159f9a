"""Secret redaction for audit records, in time linear in the input.

Every built-in pattern uses bounded quantifiers only. The token patterns start with a
negative lookbehind excluding their own body characters, so a deep match attempt starts
only at the edge of a token and attempts scan disjoint stretches of text; the PEM body stops
at the next "--". A 1 MB adversarial input (long uppercase runs, repeated prefixes, an
unclosed PEM header) thus costs one pass per detector, and a detector runs at all only when
one of its literal needles occurs in the text.

Text inside JSON strings (tool-call arguments, JSON tool results) hides secrets behind
escapes: a PEM key's lines are joined by a literal backslash-n, a key may be spelled with
`\\u00XX`. Text containing backslashes is therefore also scanned in decoded form and the
spans found there are mapped back onto the original, which is what gets rewritten.
"""

from __future__ import annotations

import bisect
import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies.errors import ParamError

MASK = "[REDACTED:redaction_failed]"
NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
"""What a detector name may look like; it ends up inside `[REDACTED:<name>]`."""

_ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))')
_SIMPLE_ESCAPES = {
    '"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
}  # fmt: skip
_UNESCAPE_DEPTH = 2
"""Decode JSON escapes this many times: a JSON string inside a JSON string inside a message."""

_LEAVES = frozenset({type(None), bool, int, float})
Span = tuple[int, int, int]
"""(start, end, detector index) of a secret in some text."""


@dataclass(frozen=True, slots=True)
class Detector:
    """A named secret pattern; it runs only when one of `needles` occurs (always if none)."""

    name: str
    pattern: re.Pattern[str]
    needles: tuple[str, ...] = ()
    group: int | str = 0
    """The part of the match that is the secret (e.g. the token after `Bearer `)."""
    accept: Callable[[str], bool] | None = None
    """A cheap second look at a candidate, for patterns prose can imitate."""


def _opaque_token(token: str) -> bool:
    # "Bearer responsibilities" is prose; real tokens carry digits or punctuation.
    return any(c.isdigit() or c in "._~+/=-" for c in token)


_PEM_LABEL = r"-----(?:BEGIN|END)[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"

BUILTIN: tuple[Detector, ...] = (
    Detector(
        "private_key",
        re.compile(
            _PEM_LABEL.replace("(?:BEGIN|END)", "BEGIN")
            # Body stops at "--", so an unclosed header followed by more headers stays linear;
            # without an END line the header and the key material after it are still removed.
            + r"(?:[A-Za-z0-9+/=:,._ \t\r\n]|-(?!-)){0,65536}"
            + "(?:"
            + _PEM_LABEL.replace("(?:BEGIN|END)", "END")
            + ")?"
        ),
        ("PRIVATE KEY",),
    ),
    Detector(
        "anthropic_key",
        re.compile(r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_-]{20,1024}"),
        ("sk-ant-",),
    ),
    Detector(
        "openai_key",
        re.compile(
            r"(?<![A-Za-z0-9_-])sk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,1024}"
            r"|[A-Za-z0-9]{20,1024})"
        ),
        ("sk-",),
    ),
    Detector(
        "aws_access_key",
        re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
        ("AKIA", "ASIA"),
    ),
    Detector(
        "github_token",
        re.compile(
            r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})"
        ),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Detector(
        "slack_token",
        re.compile(r"(?<![A-Za-z0-9-])xox[abpors]-[A-Za-z0-9-]{10,250}"),
        ("xox",),
    ),
    Detector(
        "jwt",
        re.compile(
            r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{4,8192}\.eyJ[A-Za-z0-9_-]{4,16384}"
            r"\.[A-Za-z0-9_-]{0,8192}"
        ),
        ("eyJ",),
    ),
    Detector(
        "bearer_token",
        re.compile(r"(?<![A-Za-z])(?i:bearer)[ \t]{1,8}(?P<secret>[A-Za-z0-9._~+/=-]{16,4096})"),
        ("earer", "EARER"),
        group="secret",
        accept=_opaque_token,
    ),
)


def custom_detector(name: str, regex: str) -> Detector:
    """Compile an operator's pattern; raises ParamError naming the field that is wrong.

    It runs as written, on every string: operators should bound its quantifiers too.
    """
    if not NAME.fullmatch(name):
        raise ParamError(
            "name",
            "expected a letter, then lower-case letters, digits or _ (it is shown as "
            f"[REDACTED:<name>]), got {name!r}",
        )
    try:
        pattern = re.compile(regex)
    except re.error as exc:
        raise ParamError("regex", f"invalid regular expression: {exc}") from None
    if _can_match_empty(pattern):
        raise ParamError("regex", "can match the empty string; a pattern must match a secret")
    return Detector(name, pattern)


_EMPTY_PROBES = ("", "a", " a1-", "A\nb.", "0")


def _can_match_empty(pattern: re.Pattern[str]) -> bool:
    if any(m.end() == m.start() for probe in _EMPTY_PROBES for m in pattern.finditer(probe)):
        return True
    # The parser's minimum width is exact (e.g. `x?(?=y)`); if it is unknown, the probes
    # above are the whole check.
    return _min_width(pattern) == 0


def _min_width(pattern: re.Pattern[str]) -> int | None:
    """The shortest text `pattern` can match, from CPython's own (internal) parser; None
    when that is not available."""
    try:
        parser: Any = importlib.import_module("re._parser")
        low: int = parser.parse(pattern.pattern, pattern.flags).getwidth()[0]
    except (ImportError, AttributeError, TypeError):
        return None
    return low


class Redactor:
    """Replaces secrets with `[REDACTED:<detector>]` in text and in JSON-like values."""

    __slots__ = ("_min_len", "_needles", "detectors")

    def __init__(self, detectors: Sequence[Detector]) -> None:
        self.detectors = tuple(detectors)
        widths = [_min_width(d.pattern) for d in self.detectors]
        self._min_len = min((w or 0 for w in widths), default=0)
        """Text shorter than this holds no secret (most strings of a record: ids, names)."""
        needles = {n for d in self.detectors for n in d.needles}
        gated = all(d.needles for d in self.detectors)
        self._needles = (
            re.compile("|".join(map(re.escape, sorted(needles)))) if gated and needles else None
        )
        """Every needle in one pattern, when every detector has some: one search tells
        whether any detector needs to run at all."""

    @classmethod
    def build(cls, *, builtin: bool = True, custom: Sequence[Detector] = ()) -> Redactor:
        return cls([*(BUILTIN if builtin else ()), *custom])

    def text(self, text: str) -> str:
        if len(text) < self._min_len:
            return text
        spans = self._find(text, _UNESCAPE_DEPTH)
        if not spans:
            return text
        out: list[str] = []
        pos = 0
        for start, end, which in _merge(spans):
            out.append(text[pos:start])
            out.append(f"[REDACTED:{self.detectors[which].name}]")
            pos = end
        out.append(text[pos:])
        return "".join(out)

    def value(self, value: object) -> Any:
        """Redact every string inside dicts, lists and tuples; keys are left as they are."""
        if type(value) in _LEAVES:  # first: the ABC check below costs more than the walk
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict | Mapping):  # a dict is found without the ABC
            return {k: self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value

    def _find(self, text: str, depth: int) -> list[Span]:
        spans = self._scan(text)
        if depth and "\\" in text:
            view = _Unescaped.of(text)
            if view is not None:
                spans.extend(view.to_original(s) for s in self._find(view.text, depth - 1))
        return spans

    def _scan(self, text: str) -> list[Span]:
        spans: list[Span] = []
        if self._needles is not None and self._needles.search(text) is None:
            return spans
        for which, det in enumerate(self.detectors):
            if det.needles and not any(n in text for n in det.needles):
                continue
            for match in det.pattern.finditer(text):
                start, end = match.span(det.group)
                if start == end or (det.accept is not None and not det.accept(text[start:end])):
                    continue
                spans.append((start, end, which))
        return spans


def mask(value: object) -> Any:
    """Every string (and anything not JSON-like) replaced by the failure marker; keys kept."""
    if isinstance(value, Mapping):
        return {k: mask(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask(v) for v in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return MASK


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
