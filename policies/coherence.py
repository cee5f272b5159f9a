"""tool_pair_coherence: repairs tool-call ordering so a strict upstream accepts the list.

Clients, other proxies and earlier curators in a misconfigured chain can leave a history
that OpenAI rejects with a 400: a `tool` result whose call is gone, a call whose result
never came, an empty `tool_calls: []`. This curator makes `invariants.ordering_errors`
empty for any input, whatever the ordering, and is the identity on a list that is already
valid (so it is idempotent, and free to run anywhere in a chain).

Repairs, in both directions and for parallel calls:
- a result that answers no pending call of the nearest preceding block, or answers one a
  second time, is dropped (legacy `function` results likewise);
- call ids may repeat within a block (OpenAI accepts two calls `d` answered by two results
  `d`): results pair with calls of their id by position, the k-th result `d` answering the
  k-th call `d`, so a repeated id is answered as many times as it was called;
- calls left unanswered before the next non-result message are removed from their
  assistant message (an unanswered legacy `function_call` too); when nothing remains the
  `tool_calls` key goes, and a message left with nothing to say is dropped;
- an assistant message that never said anything (no content, no calls) is dropped.

Pins: pinned system, developer and user messages are never touched, as they never need
repair. A policy that pins `assistant` or `tool` messages cannot keep an invalid one in
place: a 400 from the upstream helps nobody, so valid ordering wins over such a pin.
The last unit is repaired like any other: repair is what makes it acceptable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from policies.base import Action, ActionKind, CurationContext, CuratorOutput
from policies.messages import MAPPING, Message, Unit, call_ids, is_result, opens_block, role, units

_SPEECH_KEYS = ("content", "refusal", "audio", "function_call")


@dataclass(slots=True)
class _Repair:
    """What one pass found; local to a single `curate` call."""

    out: list[tuple[int, Message]] = field(default_factory=list)
    orphans: list[int] = field(default_factory=list)
    trimmed: list[int] = field(default_factory=list)
    emptied: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ToolPairCoherence:
    """Drops orphan results and unanswered calls so tool-call ordering is always valid."""

    name: ClassVar[str] = "tool_pair_coherence"

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        repair = _Repair()
        for unit in units(messages):
            head = messages[unit.start]
            if opens_block(head):
                _repair_block(messages, unit, repair)
            elif is_result(head):
                repair.orphans.append(unit.start)
            elif role(head) == "assistant":
                _repair_assistant(unit.start, head, repair)
            else:
                repair.out.append((unit.start, head))
        if not (repair.orphans or repair.trimmed or repair.emptied):
            return CuratorOutput(list(messages))
        return CuratorOutput([m for _, m in repair.out], self._actions(messages, repair, ctx))

    def _actions(
        self, messages: Sequence[Message], repair: _Repair, ctx: CurationContext
    ) -> tuple[Action, ...]:
        def cost(indexes: list[int]) -> int:
            return sum(ctx.count(messages[i]) for i in indexes)

        actions: list[Action] = []
        if repair.orphans:
            reason = f"dropped {len(repair.orphans)} result(s) answering no pending call"
            actions.append(self._action("drop", repair.orphans, cost(repair.orphans), reason))
        if repair.trimmed:
            kept = dict(repair.out)
            saved = cost(repair.trimmed) - sum(ctx.count(kept[i]) for i in repair.trimmed)
            reason = f"removed unanswered calls from {len(repair.trimmed)} assistant message(s)"
            actions.append(self._action("repair", repair.trimmed, saved, reason))
        if repair.emptied:
            reason = f"dropped {len(repair.emptied)} assistant message(s) with nothing left to say"
            actions.append(self._action("drop", repair.emptied, cost(repair.emptied), reason))
        return tuple(actions)

    def _action(self, kind: ActionKind, indexes: list[int], tokens: int, reason: str) -> Action:
        return Action(self.name, kind, tuple(indexes), tokens, reason)


def _repair_block(messages: Sequence[Message], unit: Unit, repair: _Repair) -> None:
    """Keep the results that answer a pending call once; keep only the answered calls."""
    head = messages[unit.start]
    # Plain dicts of counts, not Counters: this runs per block, and Counter costs 3x here.
    pending: dict[str, int] = {}
    for cid in call_ids(head):
        pending[cid] = pending.get(cid, 0) + 1
    unanswered = sum(pending.values())
    function_pending = bool(head.get("function_call"))
    function_answered = False
    results: list[tuple[int, Message]] = []
    for i in range(unit.start + 1, unit.stop):
        msg = messages[i]
        tid = msg.get("tool_call_id")
        if role(msg) == "tool" and isinstance(tid, str) and pending.get(tid):
            pending[tid] -= 1
            unanswered -= 1
            results.append((i, msg))
        elif role(msg) == "function" and function_pending:
            function_pending = False
            function_answered = True
            results.append((i, msg))
        else:
            repair.orphans.append(i)
    fixed = head if not unanswered else _answered_only(head, pending)
    if head.get("function_call") and not function_answered:
        fixed = {k: v for k, v in fixed.items() if k != "function_call"}
    if fixed is head:
        repair.out.append((unit.start, head))
    elif _says_nothing(fixed):
        repair.emptied.append(unit.start)
    else:
        repair.trimmed.append(unit.start)
        repair.out.append((unit.start, fixed))
    repair.out.extend(results)


def _repair_assistant(index: int, msg: Message, repair: _Repair) -> None:
    """An assistant message that expects no results: drop an empty `tool_calls` or all of it."""
    if msg.get("tool_calls") == []:
        fixed = {k: v for k, v in msg.items() if k != "tool_calls"}
        if _says_nothing(fixed):
            repair.emptied.append(index)
        else:
            repair.trimmed.append(index)
            repair.out.append((index, fixed))
    elif all(msg.get(k) is None for k in _SPEECH_KEYS) and not msg.get("tool_calls"):
        repair.emptied.append(index)
    else:
        repair.out.append((index, msg))


def _answered_only(head: Message, unanswered: dict[str, int]) -> Message:
    """`head` without the calls left unanswered (`unanswered`: id -> how many).

    With a repeated id, the last calls of that id are the unanswered ones: results pair
    with calls by position, so the first results answer the first calls."""
    calls = head.get("tool_calls")
    if not isinstance(calls, list):
        return head
    total: dict[str, int] = {}
    for cid in call_ids(head):
        total[cid] = total.get(cid, 0) + 1
    answered = {cid: n - unanswered.get(cid, 0) for cid, n in total.items()}
    # Entries without a string id cannot be answered or judged; they stay as sent.
    kept = [c for c in calls if not _has_id(c) or _take(answered, c["id"])]
    if not kept:
        return {k: v for k, v in head.items() if k != "tool_calls"}
    return {**head, "tool_calls": kept}


def _take(left: dict[str, int], call_id: str) -> bool:
    """Count one answer to `call_id` as used; False when none is left."""
    if not left.get(call_id):
        return False
    left[call_id] -= 1
    return True


def _has_id(call: object) -> bool:
    return isinstance(call, MAPPING) and isinstance(call.get("id"), str)


def _says_nothing(msg: Message) -> bool:
    """True for an assistant message left with no text, refusal, audio or call."""
    if msg.get("content") not in (None, "", []):
        return False
    return all(not msg.get(k) for k in ("refusal", "audio", "function_call", "tool_calls"))
