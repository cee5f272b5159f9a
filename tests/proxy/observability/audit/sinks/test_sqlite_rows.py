"""sqlite_rows.py: a batch's write hands the GIL over before each of its statements and
before its commit, so an event loop waiting for it does not wait out the writer's Python
(binding a chunk's parameters, the counts) or a switch interval."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks import sqlite as sqlite_sink
from proxy.observability.audit.sinks import sqlite_rows
from proxy.observability.audit.sinks.sqlite import SqliteSink
from tests.factories import audited

YIELD = "(GIL let go)"


def test_every_statement_of_a_batch_and_its_commit_come_after_a_hand_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    sink = SqliteSink(str(tmp_path / "audit.db"))
    first = [builder.build(audited(id="r0", time=1.0, original=[{"role": "user", "content": "a"}]))]
    sink.write_many(first)  # opens and migrates the store: not what is measured
    events: list[str] = []
    for module in (sqlite_sink, sqlite_rows):
        monkeypatch.setattr(module, "let_the_loop_in", lambda: events.append(YIELD))
    sink._connection().set_trace_callback(events.append)
    batch = [
        builder.build(
            audited(id=f"r{n}", time=1.0 + n, original=[{"role": "user", "content": f"m{n}"}])
        )
        for n in range(1, 40)  # 39 rows: chunks of 32, 4, 2 and 1
    ]
    sink.write_many(batch)
    sink.close()
    statements = [i for i, event in enumerate(events) if event != YIELD]
    written = [events[i].split(" ", 2)[:2] for i in statements]
    assert ["INSERT", "INTO"] in written  # the counts, the bodies and the records
    assert sum(1 for w in written if w[0] == "INSERT") >= 4 + 1
    assert written[0] == ["BEGIN", "IMMEDIATE"]
    assert written[-1] == ["COMMIT"]
    for i in statements:
        if events[i].startswith(("BEGIN", "INSERT", "COMMIT")):
            assert events[i - 1] == YIELD, events[i - 1 : i + 1]
