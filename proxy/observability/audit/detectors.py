"""The secret detectors: built-in patterns and operators' own.

Every built-in pattern uses bounded quantifiers only, and a failing match attempt gives up
within a few dozen characters or at the end of the token it started on. Token patterns
start at a token's edge: a negative lookbehind excludes their own body characters, except
that a token may also follow a percent-encoded byte (`?key=` spelled `%3D`, or `%253D`
when encoded twice), and an `_` where the body has none of its own or a match is
unconditional once started (`OPENAI_API_KEY_sk-proj-...`). So deep attempts scan disjoint
stretches of text, and a 1 MB adversarial input costs one pass per detector. A token
pattern opens with its literal lead and checks the edge behind it (`_led`), so `re`
skips from one occurrence of the lead to the next instead of trying every position.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from policies.errors import ParamError

NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
"""What a detector name may look like; it ends up inside `[REDACTED:<name>]`."""


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
    gate: re.Pattern[str] | None = None
    """A fast search that every match's text also matches, for a pattern whose needles
    are common words: the pattern runs only on a text the gate finds something in."""


def _opaque_token(token: str) -> bool:
    # "Bearer responsibilities" is prose; real tokens carry digits or punctuation.
    return any(c.isdigit() or c in "._~+/=-" for c in token)


def _basic_credentials(token: str) -> bool:
    # "Basic understanding" is prose; credentials are base64 of "user:password".
    if _opaque_token(token):
        return True
    try:
        decoded = base64.b64decode(token + "=" * (-len(token) % 4), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded


def _behind(width: int, excluded: str) -> str:
    """A token's edge, checked `width` characters after it: the token starts not after one
    of `excluded`, or after a %XX escape."""
    back = rf"(?s:.{{{width}}})"
    return (
        rf"(?:(?<![{excluded}]{back})|(?<=%[0-9A-Fa-f]{{2}}{back})"
        rf"|(?<=%25[0-9A-Fa-f]{{2}}{back}))"
    )


def _led(lead: str, width: int, excluded: str) -> str:
    """`lead` (a pattern always `width` characters long) at a token's edge, the edge checked
    behind it rather than before. The same matches, found far faster: a pattern that
    opens with a lookbehind is tried at every position of the text, one that opens with a
    literal jumps from one occurrence of it to the next (measured on a 480 KB text holding
    "task-": 17.5 ms -> 0.3 ms for `sk-`; `re` keeps the GIL all that time, and the event
    loop waits)."""
    return lead + _behind(width, excluded)


_PEM_LABEL = r"-----(?:BEGIN|END)[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
_SPACE = r"(?:[ \t]|%20|\+)"
"""A space as a header, a form or a URL spells it."""
_ASSIGN = r"""["']?[ \t]{0,8}(?:[:=]{1,2}>?|%3[Dd]|>)[ \t]{0,8}["']?"""
"""`=`, `:`, `: "`, `=>`, `%3D` or an XML element's `>` between a name and its value."""

_AWS_BEHIND = (
    r"(?:(?<=(?i:aws)(?s:.))"
    + _behind(4, "A-Za-z0-9")
    + r"|(?<=(?i:aws)[ _-](?s:.))"
    + _behind(5, "A-Za-z0-9")
    + ")"
)
"""Behind an s: "aws" (and a separator) at a token's edge."""

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
        re.compile(_led("sk-ant-", 7, "A-Za-z0-9-") + r"[A-Za-z0-9_-]{20,1024}"),
        ("sk-ant-",),
    ),
    Detector(
        "openai_key",
        re.compile(
            _led("sk-", 3, "A-Za-z0-9-")
            + r"(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,1024}|[A-Za-z0-9]{20,1024})"
        ),
        ("sk-",),
    ),
    Detector(
        "aws_access_key",
        re.compile(_led("(?:AKIA|ASIA)", 4, "A-Za-z0-9") + r"[A-Z0-9]{16}(?![A-Za-z0-9])"),
        ("AKIA", "ASIA"),
    ),
    Detector(
        "aws_secret_key",
        re.compile(
            # (?:aws[ _-]?)?secret[ _-]?access[ _-]?key | aws[ _-]?session[ _-]?token, any
            # case, at a token's edge; led by the s ([Ss\u017f] is (?i:s)), with what comes
            # before it (the edge, or "aws" and the edge before that) checked behind it.
            r"[Ss\u017f](?:(?:"
            + _behind(1, "A-Za-z0-9")
            + "|"
            + _AWS_BEHIND
            + r")(?i:ecret[ _-]?access[ _-]?key)|"
            + _AWS_BEHIND
            + r"(?i:ession[ _-]?token))"
            + _ASSIGN
            + r"(?P<secret>[A-Za-z0-9/+=]{16,2048})"
        ),
        ("ecret", "ECRET", "ession", "ESSION"),
        group="secret",
        # Code says "session" and "secret" everywhere; a pattern led by a case-insensitive
        # alternation tried every position (measured: 33 ms on a 127k-token agent request,
        # three quarters of its redaction). A literal-led search of the names' middle: 3 ms.
        # Where it finds one, the s-led pattern runs: 4 ms on a 480 KB text (28 edge-first).
        gate=re.compile(r"[Ss\u017f](?i:ecret[ _-]?access|ession[ _-]?token)"),
    ),
    Detector(
        "github_token",
        re.compile(
            "(?:"
            + _led("gh[pousr]_", 4, "A-Za-z0-9")
            + r"[A-Za-z0-9]{36,255}|"
            + _led("github_pat_", 11, "A-Za-z0-9")
            + r"[A-Za-z0-9_]{22,255})"
        ),
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    Detector(
        "slack_token",
        re.compile(_led("xox[abpors]-", 5, "A-Za-z0-9-") + r"[A-Za-z0-9-]{10,250}"),
        ("xox",),
    ),
    Detector(
        "jwt",
        re.compile(
            # `_` stays excluded: the body has it and a failed attempt scans the whole body.
            _led("eyJ", 3, "A-Za-z0-9_-")
            + r"[A-Za-z0-9_-]{4,8192}\.eyJ[A-Za-z0-9_-]{4,16384}\.[A-Za-z0-9_-]{0,8192}"
        ),
        ("eyJ",),
    ),
    Detector(
        "bearer_token",
        re.compile(
            # [Bb](?i:earer) matches what (?i:bearer) does (b folds to B alone), and `re`
            # finds a pattern led by a character set faster.
            _led("[Bb](?i:earer)", 6, "A-Za-z")
            + _SPACE
            + r"{1,8}(?P<secret>[A-Za-z0-9._~+/=-]{16,4096})"
        ),
        ("earer", "EARER"),
        group="secret",
        accept=_opaque_token,
    ),
    Detector(
        "basic_auth",
        re.compile(
            _led("[Bb](?i:asic)", 5, "A-Za-z") + _SPACE + r"{1,8}(?P<secret>[A-Za-z0-9+/=]{8,4096})"
        ),
        ("asic", "ASIC"),
        group="secret",
        accept=_basic_credentials,
    ),
    Detector(
        "url_credentials",
        # The password of `scheme://user:password@host`; the user name stays readable.
        re.compile(r"://[^\s/?#@:\"'<>]{0,256}:(?P<secret>[^\s/?#@\"'<>]{1,256})@"),
        ("://",),
        group="secret",
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
    return min_width(pattern) == 0


def min_width(pattern: re.Pattern[str]) -> int | None:
    """The shortest text `pattern` can match, from CPython's own (internal) parser; None
    when that is not available."""
    try:
        parser: Any = importlib.import_module("re._parser")
        low: int = parser.parse(pattern.pattern, pattern.flags).getwidth()[0]
    except (ImportError, AttributeError, TypeError):
        return None
    return low
