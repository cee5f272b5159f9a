"""The rules every curated output must satisfy (DESIGN.md, "Invariants").

`ordering_errors` is also what a strict upstream checks, so a list that passes it is one
OpenAI accepts. `check` compares a curated list with its original.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from policies.messages import SUMMARY_PREFIX, Message, call_ids, role, units

if TYPE_CHECKING:
    from policies.base import CurationContext

IDENTITY_KEYS = ("role", "name", "tool_call_id")


def ordering_errors(messages: Sequence[Message]) -> list[str]:
    """Violations of OpenAI's message-ordering rules, empty when the list is valid."""
    errors: list[str] = []
    pending: set[str] = set()
    function_pending = False
    for i, msg in enumerate(messages):
        r = role(msg)
        if r == "tool":
            tid = msg.get("tool_call_id")
            if tid not in pending:
                errors.append(f"messages[{i}]: tool result {tid!r} answers no pending call")
            pending.discard(tid)
            continue
        if r == "function":
            if not function_pending:
                errors.append(f"messages[{i}]: function result without a function_call")
            function_pending = False
            continue
        if pending:
            errors.append(f"messages[{i}]: calls {sorted(pending)} are unanswered")
            pending = set()
        function_pending = False
        if r == "assistant":
            errors.extend(_assistant_errors(i, msg))
            pending = set(call_ids(msg))
            function_pending = bool(msg.get("function_call"))
    if pending:
        errors.append(f"end: calls {sorted(pending)} are unanswered")
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
    if set(curated) - {"content", "tool_calls"} != set(original) - {"content", "tool_calls"}:
        return False
    if any(curated[k] != original[k] for k in curated if k not in ("content", "tool_calls")):
        return False
    if curated.get("tool_calls") != original.get("tool_calls"):
        kept = curated.get("tool_calls")
        before = original.get("tool_calls")
        if not isinstance(kept, list) or not isinstance(before, list):
            return False
        if any(c not in before for c in kept):
            return False
    return _content_shortened(curated.get("content"), original.get("content"))


def _content_shortened(after: object, before: object) -> bool:
    if after == before:
        return True
    if isinstance(after, str):
        # A placeholder naming what was removed, or a cut keeping a prefix or a suffix.
        if after.startswith("[") or not after:
            return True
        text = before if isinstance(before, str) else ""
        k = min(32, len(after), len(text))
        return k > 0 and (after[:k] == text[:k] or after[-k:] == text[-k:])
    return isinstance(after, list) and isinstance(before, list) and len(after) <= len(before)


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
    if not ordering_errors(original):
        errors.extend(ordering_errors(curated))
    mapping = _match(original, curated)
    if mapping is None:
        return [*errors, "curated messages are not an ordered derivation of the original"]
    matched = {o: c for c, o in mapping.items()}
    for i in sorted(ctx.pinned(original)):
        if i not in matched or curated[matched[i]] != original[i]:
            errors.append(f"pinned message {i} was not kept verbatim")
    if original:
        last = units(original)[-1]
        missing = [i for i in last.indexes() if i not in matched]
        if missing:
            errors.append(f"last unit messages {missing} were dropped")
    if budget is not None:
        used = ctx.counter.count_messages(curated, ctx.model)
        if used > budget:
            errors.append(f"curated tokens {used} exceed budget {budget}")
    return errors


def assert_ok(
    original: Sequence[Message], curated: Sequence[Message], ctx: CurationContext, step: str
) -> None:
    errors = check(original, curated, ctx)
    if errors:
        raise AssertionError(f"{step} broke the curator contract: " + "; ".join(errors))


def _match(original: Sequence[Message], curated: Sequence[Message]) -> dict[int, int] | None:
    """Map curated index -> original index, in order; None if impossible.

    Greedy is enough: identical messages are interchangeable, and a shortened message keeps
    its role/name/tool_call_id, so the earliest candidate never blocks a later match.
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
