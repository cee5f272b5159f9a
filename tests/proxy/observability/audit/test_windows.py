"""proxy/observability/audit/windows.py: a long text searched a window at a time finds
exactly what one search finds (issue U item 4: one search over a 25 MB blob held the GIL
for 1.1 s), and redaction of such a text is the same as before."""

from __future__ import annotations

import random
import re

import pytest

from proxy.observability.audit import windows
from proxy.observability.audit.detectors import BUILTIN
from proxy.observability.audit.redact import Redactor
from tests.proxy.observability.audit.test_redact import AWS_SECRET, POSITIVE

SECRETS = [s for found in POSITIVE.values() for s in found] + [
    f"aws_secret_access_key = {AWS_SECRET}",
    "Authorization: Bearer abc.def-123_456~xyz",
    "https://deploy:hunter2-Pw@example.com/x",
]


def _blob(seed: int, size: int) -> tuple[str, list[str]]:
    """Filler with secrets planted around window edges (and some anywhere)."""
    rng = random.Random(seed)
    filler = "".join(rng.choice("abcdefghij KLMNOP0123=/+-_.:\n") for _ in range(4096))
    text, planted = [], []
    at = 0
    while at < size:
        edge = (at // windows.WINDOW + 1) * windows.WINDOW
        secret = f" {rng.choice(SECRETS)}\n"
        start = edge - rng.randrange(len(secret) + 2) if rng.random() < 0.7 else at + 500
        while at < start:
            text.append(filler[: min(len(filler), start - at)])
            at += len(text[-1])
        text.append(secret)
        planted.append(secret.strip())
        at += len(secret)
    return "".join(text), planted


@pytest.mark.parametrize("seed", range(3))
def test_windows_find_what_one_search_finds(seed: int) -> None:
    text, _ = _blob(seed, 5 * windows.WINDOW)
    for det in BUILTIN:
        far = windows.reach(det.pattern)
        assert far is not None, det.name
        whole = [m.span(det.group) for m in det.pattern.finditer(text)]
        assert [m.span(det.group) for m in windows.finditer(det.pattern, text, far)] == whole
        if det.gate is not None:
            gate_far = windows.reach(det.gate)
            assert windows.search(det.gate, text, gate_far) == bool(det.gate.search(text))
        for needle in det.needles:
            assert windows.contains(text, needle) == (needle in text)


def test_a_long_text_is_redacted_as_one_search_redacts_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text, planted = _blob(7, 4 * windows.WINDOW)
    windowed = Redactor.build().text(text)
    monkeypatch.setattr(windows, "WINDOW", 10**9)  # one search, as before
    assert windowed == Redactor.build().text(text)
    assert windowed.count("[REDACTED:") >= len(planted)


def test_unbounded_patterns_are_searched_whole() -> None:
    assert windows.reach(re.compile(r"key=\w+")) is None
    assert windows.reach(re.compile(r"a{3}(?=b{2})")) == 5
    assert windows.reach(re.compile(r"(?<=x{9})a")) == 1


def test_a_long_text_lets_go_of_the_gil_between_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    # A blob no detector matches: one search over 4 MB held the GIL 749 ms here.
    text = "a" * (64 * windows.WINDOW)
    yields: list[None] = []
    monkeypatch.setattr(windows, "let_the_loop_in", lambda: yields.append(None))
    assert Redactor.build().text(text) == text
    assert len(yields) >= 64  # at least once per window of the needles' search
