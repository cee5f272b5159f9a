"""Audit records written by the real sinks, in both formats, for the viewer's and readers' tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from policies.base import Action
from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.jsonl import JsonlSink
from proxy.observability.audit.sinks.sqlite import SqliteSink
from proxy.observability.exchange import ExchangeRecord
from tests import factories as f
from tests.factories import audited

T0 = 1_767_225_600.0
SCRIPT = "<script>alert('x')</script>"
SECRET = "sk-proj-" + "Zx9" * 12


def conversation(turn: int, opening: str = "Fix the tests.") -> list[dict[str, object]]:
    """An agent conversation after `turn` tool rounds (the first two messages never change)."""
    msgs: list[dict[str, object]] = [f.system("You are an agent."), f.user(opening)]
    for t in range(turn):
        msgs += [
            f.assistant_calls(f.call(f"c{t}", "grep")),
            f.tool_result(f"c{t}", f"out {t} " * 50),
        ]
    return msgs


def entries() -> list[ExchangeRecord]:
    """Two conversations (three and two turns), a summarizer call and a failed request."""
    out: list[ExchangeRecord] = []
    for n in range(3):
        original = conversation(n + 1)
        curated = [*original[:2], *original[-2:]] if n else None
        actions = (
            (Action("token_budget", "drop", tuple(range(2, len(original) - 2)), 40 * n, "over"),)
            if n
            else ()
        )
        out.append(
            audited(
                id=f"a{n}00000000", time=T0 + n, route="agents", policy="agent", model="gpt-4o",
                original=original, curated=curated, actions=actions, tokens_before=100 + n,
                tokens_after=60 if n else 100, status=200, response=b'{"choices": []}',
            )
        )  # fmt: skip
    for n in range(2):
        out.append(
            audited(
                id=f"b{n}00000000", time=T0 + 10 + n, route="chat", policy="off",
                model="gpt-4o-mini",
                original=[*conversation(n, f"Say {SCRIPT}"), f.user(f"key {SECRET}")], status=200,
            )
        )  # fmt: skip
    out.append(audited(id="c000000000", time=T0 + 20, kind="summarizer", parent_id="a200000000",
                          route="agents", model="gpt-4o-mini", original=[f.user("summarize")],
                          status=200))  # fmt: skip
    out.append(audited(id="d000000000", time=T0 + 30, route="chat", policy="off",
                          model="gpt-4o", original=[f.user("rate")], status=429,
                          response=b'{"error": {"message": "slow"}}'))  # fmt: skip
    return out


def write(folder: Path, items: Sequence[ExchangeRecord]) -> tuple[Path, Path]:
    builder = RecordBuilder(Redactor.build())
    records = [builder.build(e) for e in items]
    db, lines = folder / "audit.db", folder / "audit.jsonl"
    sqlite = SqliteSink(str(db))
    sqlite.write_many(records)
    sqlite.close()
    jsonl = JsonlSink(str(lines))
    jsonl.write_many(records)
    jsonl.close()
    return db, lines
