"""sqlite_rows.py: a batch of small records is written handing the GIL over before each
statement and before the commit, so an event loop waiting for it does not wait out the
writer's Python (binding a chunk's parameters, the counts) or a switch interval. A batch
with an agent's turn in it is written in one go: its write is in a turn the curation
thread may be waiting for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proxy.observability.audit.entry import AuditRecord, RecordBuilder
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks import sqlite as sqlite_sink
from proxy.observability.audit.sinks import sqlite_rows
from proxy.observability.audit.sinks.sqlite import SqliteSink
from proxy.observability.audit.sinks.sqlite_refs import CHAIN_MIN_REFS
from tests.factories import audited

YIELD = "(GIL let go)"
BUILDER = RecordBuilder(Redactor.build(), by_reference=True)


def small(n: int) -> AuditRecord:
    return BUILDER.build(
        audited(id=f"r{n}", time=1.0 + n, original=[{"role": "user", "content": f"m{n}"}])
    )


def turn(n: int) -> AuditRecord:
    history = [{"role": "user", "content": f"step {k}"} for k in range(CHAIN_MIN_REFS)]
    return BUILDER.build(audited(id=f"t{n}", time=1.0 + n, original=history))


def writing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: list[AuditRecord]) -> list[str]:
    """The statements SQLite ran for `batch`, with a YIELD wherever the GIL was let go."""
    sink = SqliteSink(str(tmp_path / "audit.db"))
    sink.write_many([small(0)])  # opens and migrates the store: not what is looked at
    events: list[str] = []
    for module in (sqlite_sink, sqlite_rows):
        monkeypatch.setattr(module, "let_the_loop_in", lambda: events.append(YIELD))
    sink._connection().set_trace_callback(events.append)
    sink.write_many(batch)
    sink.close()
    return events


def heads(events: list[str]) -> list[Any]:
    return [event.split(" ", 2)[:2] for event in events if event != YIELD]


def test_small_records_are_written_handing_the_gil_over_before_each_statement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = writing(tmp_path, monkeypatch, [small(n) for n in range(1, 40)])  # 32+4+2+1 rows
    written = heads(events)
    assert written[0] == ["BEGIN", "IMMEDIATE"]
    assert written[-1] == ["COMMIT"]
    assert sum(1 for w in written if w[0] == "INSERT") >= 4 + 1  # the counts, the records
    for i, event in enumerate(events):
        if event.startswith(("BEGIN", "INSERT", "COMMIT")):
            assert events[i - 1] == YIELD, events[i - 1 : i + 1]


def test_a_batch_with_an_agents_turn_is_written_in_one_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = writing(tmp_path, monkeypatch, [small(1), turn(2), small(3)])
    assert ["INSERT", "INTO"] in heads(events)
    assert YIELD not in events
