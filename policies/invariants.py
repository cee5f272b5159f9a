"""The rules every curated output must satisfy (DESIGN.md, "Invariants").

`ordering_errors` is also what a strict upstream checks, so a list that passes it is one
OpenAI accepts. `check` compares a curated list with its original.

Call ids may repeat within one assistant message: OpenAI accepts two calls with id `d`
answered by two results with id `d` (paired by position), so pending calls are counted,
not kept in a set.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from policies.messages import SUMMARY_PREFIX, Message, call_ids, role, units

if TYPE_CHECKING:
    from policies.base import CurationContext

IDENTITY_KEYS = ("role", "name", "tool_call_id")
REPAIRABLE_KEYS = frozenset({"content", "tool_calls", "function_call"})


def ordering_errors(messages: Sequence[Message]) -> list[str]:
    """Violations of OpenAI's message-ordering rules, empty when the list is valid."""
    errors: list[str] = []
    pending: Counter[str] = Counter()
    function_pending = False
    for i, msg in enumerate(messages):
        r = role(msg)
        if r == "tool":
            tid = msg.get("tool_call_id")
            # A non-string id (even an unhashable one) answers nothing; it must not raise.
            if not isinstance(tid, str) or not pending[tid]:
                errors.append(f"messages[{i}]: tool result {tid!r} answers no pending call")
            else:
                pending[tid] -= 1
            continue
        if r == "function":
            if not function_pending:
                errors.append(f"messages[{i}]: function result without a function_call")
            function_pending = False
            continue
        if +pending:
            errors.append(f"messages[{i}]: calls {sorted(pending.elements())} are unanswered")
            pending = Counter()
        if function_pending:
            errors.append(f"messages[{i}]: function_call is unanswered")
        function_pending = False
        if r == "assistant":
            errors.extend(_assistant_errors(i, msg))
            pending = Counter(call_ids(msg))
            function_pending = bool(msg.get("function_call"))
    if +pending:
        errors.append(f"end: calls {sorted(pending.elements())} are unanswered")
    if function_pending:
        errors.append("end: function_call is unanswered")
    return errors


def _assistant_errors(i: int, msg: Message) -> list[str]:
    calls = msg.get("tool_calls")
    if isinstance(calls, list) and not calls:
        return [f"messages[{i}]: empty tool_calls"]
    empty = all(msg.get(k) is None for k in ("content", "refusal", "audio", "function_call"))
    if empty and not calls:
        return [f"messages[{i}]: assistant message with no content and no calls"]
    return []


def derives_from(curated: Message, original: Message) -> bool:
    """True if `curated` is `original`, or a shortened form of it (same identity)."""
    if curated == original:
        return True
    if any(curated.get(k) != original.get(k) for k in IDENTITY_KEYS):
        return False
    if set(curated) - REPAIRABLE_KEYS != set(original) - REPAIRABLE_KEYS:
        return False
    if any(curated[k] != original[k] for k in curated if k not in REPAIRABLE_KEYS):
        return False
    # Coherence repair removes unanswered calls: some or all of `tool_calls` (then the key
    # goes, as `tool_calls: []` is invalid), or the whole legacy `function_call`.
    if "function_call" in curated and curated["function_call"] != original.get("function_call"):
        return False
    if curated.get("tool_calls") != original.get("tool_calls"):
        kept = curated.get("tool_calls", [])
        before = original.get("tool_calls")
        if not isinstance(kept, list) or not isinstance(before, list):
            return False
        if any(not any(_call_derives(c, b) for b in before) for c in kept):
            return False
    return _content_shortened(curated.get("content"), original.get("content"))


def _call_derives(call: object, original: object) -> bool:
    """`call` is `original`, or `original` with its arguments cleared to a JSON object."""
    if call == original:
        return True
    if not isinstance(call, Mapping) or not isinstance(original, Mapping):
        return False
    fn, before = call.get("function"), original.get("function")
    if not isinstance(fn, Mapping) or not isinstance(before, Mapping):
        return False
    if {**call, "function": None} != {**original, "function": None}:
        return False
    if {**fn, "arguments": None} != {**before, "arguments": None}:
        return False
    try:
        return isinstance(json.loads(fn.get("arguments", "")), dict)
    except (TypeError, ValueError, RecursionError):
        return False


def _content_shortened(after: object, before: object) -> bool:
    if after == before:
        return True
    if isinstance(after, str):
        # A placeholder naming what was removed, or a cut keeping a prefix or a suffix.
        if after.startswith("[") or not after:
            return True
        text = before if isinstance(before, str) else ""
        k = min(32, len(after), len(text))
        if k > 0 and (after[:k] == text[:k] or after[-k:] == text[-k:]):
            return True
        return _kept_around_placeholder(after, text)
    return isinstance(after, list) and isinstance(before, list) and len(after) <= len(before)


def _kept_around_placeholder(after: str, text: str) -> bool:
    """True for `prefix + placeholder + suffix` of `text`, however short the kept ends are."""
    p = _common_prefix(after, text)
    s = _common_prefix(after[p:][::-1], text[p:][::-1])
    middle = after[p : len(after) - s]
    return "[" in middle or "]" in middle


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def is_summary(msg: Message) -> bool:
    content = msg.get("content")
    return isinstance(content, str) and content.startswith(SUMMARY_PREFIX)


def check(
    original: Sequence[Message],
    curated: Sequence[Message],
    ctx: CurationContext,
    *,
    budget: int | None = None,
) -> list[str]:
    """Every way `curated` breaks the contract relative to `original` (empty when fine)."""
    errors: list[str] = []
    original_valid = not ordering_errors(original)
    if original_valid:
        errors.extend(ordering_errors(curated))
    pinned = ctx.pinned(original)
    # Repairing an invalid list may have to fix its last unit too, so the rule that the
    # last unit is kept applies to valid input only.
    last = units(original)[-1].indexes() if original and original_valid else range(0)
    mapping = matched(original, curated, pinned, pinned | frozenset(last))
    if mapping is None:
        return [*errors, "curated messages are not an ordered derivation of the original"]
    kept = {o: c for c, o in mapping.items()}
    for i in sorted(pinned):
        if i not in kept or curated[kept[i]] != original[i]:
            errors.append(f"pinned message {i} was not kept verbatim")
    missing = [i for i in last if i not in kept]
    if missing:
        errors.append(f"last unit messages {missing} were dropped")
    if budget is not None:
        used = ctx.count_total(curated)
        if used > budget:
            errors.append(f"curated tokens {used} exceed budget {budget}")
    return errors


def assert_ok(
    original: Sequence[Message], curated: Sequence[Message], ctx: CurationContext, step: str
) -> None:
    errors = check(original, curated, ctx)
    if errors:
        raise AssertionError(f"{step} broke the curator contract: " + "; ".join(errors))


def matched(
    original: Sequence[Message],
    curated: Sequence[Message],
    pinned: frozenset[int] = frozenset(),
    required: frozenset[int] = frozenset(),
) -> dict[int, int] | None:
    """Which original each curated message derives from (curated index -> original
    index, in order; a summary maps to none); None when there is no such derivation."""
    found = _match_keeping(original, curated, pinned, required)
    return found if found is not None else _match(original, curated)


def _match_keeping(
    original: Sequence[Message],
    curated: Sequence[Message],
    pinned: frozenset[int],
    required: frozenset[int],
) -> dict[int, int] | None:
    """An in-order mapping (curated -> original index) that matches every `required`
    original, pins verbatim; None if there is none.

    Greedy matching cannot decide this: with two identical "continue" messages of which
    only the newer was kept, the earliest candidate is the wrong one. So this is a small
    dynamic program: ok[i][j] = curated[i:] maps into original[j:] keeping what must be.
    """
    n, m = len(curated), len(original)
    inserted = [is_summary(c) and c not in original for c in curated]
    ok = [[False] * (m + 1) for _ in range(n + 1)]
    ok[n][m] = True
    for j in range(m - 1, -1, -1):
        ok[n][j] = ok[n][j + 1] and j not in required
    for i in range(n - 1, -1, -1):
        for j in range(m, -1, -1):
            if inserted[i]:
                ok[i][j] = ok[i + 1][j]
            elif j < m:
                skip = j not in required and ok[i][j + 1]
                ok[i][j] = skip or (ok[i + 1][j + 1] and _fits(curated[i], original[j], pinned, j))
    if not ok[0][0]:
        return None
    mapping: dict[int, int] = {}
    i = j = 0
    while i < n:
        if inserted[i]:
            i += 1
        elif ok[i + 1][j + 1] and _fits(curated[i], original[j], pinned, j):
            mapping[i] = j
            i, j = i + 1, j + 1
        else:
            j += 1
    return mapping


def _fits(curated: Message, original: Message, pinned: frozenset[int], j: int) -> bool:
    return curated == original if j in pinned else derives_from(curated, original)


def _match(original: Sequence[Message], curated: Sequence[Message]) -> dict[int, int] | None:
    """Map curated index -> original index, in order; None if impossible.

    Greedy is enough to find *a* mapping (a shortened message keeps its identity keys, so
    the earliest candidate never blocks a later match); `_match_keeping` finds the one
    that keeps pins and the last unit when it exists, and this one names what is missing.
    """
    mapping: dict[int, int] = {}
    j = 0
    for i, msg in enumerate(curated):
        if is_summary(msg) and not any(is_summary(o) and o == msg for o in original[j:]):
            continue
        while j < len(original) and not derives_from(msg, original[j]):
            j += 1
        if j == len(original):
            return None
        mapping[i] = j
        j += 1
    return mapping
