"""Which original message became which curated one, and which curators touched it.

Shared by the terminal diff (`proxy.cli.audit_render`) and the web viewer (`proxy.viewer`).
Records arrive as plain dicts from any store, so everything here tolerates odd fields.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from policies.invariants import derives_from, is_summary

Blame = dict[int, list[Mapping[str, Any]]]
"""Original message index -> the actions that touched it, in chain order."""


def match(record: Mapping[str, Any]) -> tuple[Blame, dict[int, int]]:
    """(the actions that touched each original index, original index -> curated index)."""
    original, curated = record.get("original") or [], record.get("curated") or []
    blame, replayed = replay(len(original), record.get("actions") or [])
    return blame, from_replay(replayed, original, curated) or align(original, curated)


def align(original: Sequence[Any], curated: Sequence[Any]) -> dict[int, int]:
    """original index -> curated index, matched in order the way `invariants.check` does.

    The fallback for records whose actions do not account for every change.
    """
    mapping: dict[int, int] = {}
    k = 0
    for j, msg in enumerate(curated):
        if not isinstance(msg, Mapping) or (is_summary(msg) and msg not in original[k:]):
            continue
        i = k
        while i < len(original) and not (
            isinstance(original[i], Mapping) and derives_from(msg, original[i])
        ):
            i += 1
        if i < len(original):
            mapping[i] = j
            k = i + 1
    return mapping


def from_replay(
    replayed: list[int | None], original: Sequence[Any], curated: Sequence[Any]
) -> dict[int, int] | None:
    """original index -> curated index as the actions tell it, if the messages agree."""
    if len(replayed) != len(curated):
        return None
    mapping: dict[int, int] = {}
    for j, i in enumerate(replayed):
        if i is None:
            continue  # a summary's place
        a, b = curated[j], original[i]
        if not (isinstance(a, Mapping) and isinstance(b, Mapping) and derives_from(a, b)):
            return None  # an odd record (a message that is no object) aligns plainly
        mapping[i] = j
    return mapping


def curators(actions: Sequence[Mapping[str, Any]]) -> list[str]:
    """The curators named by `actions`, each once, in order."""
    return list(dict.fromkeys(str(a.get("curator")) for a in actions))


def replay(count: int, actions: Sequence[Any]) -> tuple[Blame, list[int | None]]:
    """Which actions touched each original message, and the original index of each output.

    An action's indexes refer to its curator's input, so the chain is replayed: after each
    curator, the messages it dropped leave the list (a summary takes the first one's place).
    """
    current: list[int | None] = list(range(count))
    blame: Blame = {}
    valid = [a for a in actions if isinstance(a, Mapping)]
    for _, group in itertools.groupby(valid, key=lambda a: a.get("curator")):
        removed: set[int] = set()
        summary_at: int | None = None
        for action in group:
            kind = action.get("kind")
            for pos in action.get("indexes") or ():
                index = current[pos] if isinstance(pos, int) and 0 <= pos < len(current) else None
                if index is None:
                    continue
                touched = blame.setdefault(index, [])
                if not touched or touched[-1] is not action:
                    touched.append(action)
                if kind in ("drop", "summarize"):
                    removed.add(pos)
                    if kind == "summarize":
                        summary_at = pos if summary_at is None else min(summary_at, pos)
        survivors = [x for p, x in enumerate(current) if p not in removed]
        if summary_at is not None:
            survivors.insert(sum(1 for p in range(summary_at) if p not in removed), None)
        current = survivors
    return blame, current


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix, by halving (fast on 100k-character texts)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
