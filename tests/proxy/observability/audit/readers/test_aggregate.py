"""The report's totals added up by the database (SQLite's and PostgreSQL's GROUP BY) are
`report.Row.add`'s, record for record, on odd values too; and a conversation's rows come
from its fields alone, also for a record written before records named their conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.cli.report import Row, client_records, grouped, sorted_rows, turns
from proxy.observability.audit.entry import AuditRecord
from proxy.observability.audit.message_cache import StoredMessage, message_digest
from proxy.observability.audit.readers.postgres import PostgresReader
from proxy.observability.audit.readers.query import record_conversation
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.observability.audit.sinks.postgres_writer import PostgresSink
from proxy.observability.audit.sinks.sqlite import SqliteSink
from proxy.observability.audit.stamps import iso_time

DAY = 1_893_456_000.0  # 2030-01-01T00:00:00Z
ODD: list[dict[str, Any]] = [
    {"tokens_before": 10, "tokens_after": 4, "usage": {"input": 7, "cached": 3, "output": 2}},
    {"tokens_before": 10},  # no tokens_after: the model saw them all
    {"tokens_before": 10, "tokens_after": None},  # said, and unknown: 0
    {"tokens_before": 2.5, "tokens_after": True, "usage": {"input": "9", "cache_write": 4}},
    {"usage": {"cache_write_1h": 6, "cached": 1.0}, "rescued": "yes", "skip_reason": None},
    {"rescued": [], "skip_reason": "invalid_json", "cost": None},
    {"rescued": 0, "cost": {"actual_usd": 1, "uncurated_usd": 0.5}},
    {"rescued": {"id": "x"}, "cost": {"actual_usd": "1", "uncurated_usd": 2.25}},
    {
        "rescued": True,
        "cost": {"uncurated_usd": 3.0, "uncurated_estimate": {"usd_range": [1, 4.5]}},
    },
    {"cost": {"uncurated_estimate": {"usd_range": [1, 2, 3]}}, "route": ""},
    {"response": {"text": "a NUL \u0000 and a \\u0000 as text"}, "model": "other"},
    {"kind": "summarizer", "tokens_before": 999},
]


def records() -> list[AuditRecord]:
    built = []
    for n, extra in enumerate(ODD):
        when = DAY + n * 20_000  # across two days
        # Sorted keys, as the writer encodes a message: its digest is the viewer's.
        message = orjson.dumps(
            {"role": "user", "content": f"task {n % 3}"}, option=orjson.OPT_SORT_KEYS
        )
        fields = {
            "id": f"r{n}",
            "time": iso_time(when),
            "kind": "chat",
            "route": "agents",
            "policy": "coding",
            "model": "gpt-4o",
            "status": 200,
            **({"conversation": f"conv-{n % 2}"} if n % 3 else {}),
            **extra,
        }
        built.append(
            AuditRecord(when, fields, (StoredMessage(message_digest(message), message),), None)
        )
    return built


def full(record: AuditRecord) -> dict[str, Any]:
    return record.as_dict()


@pytest.fixture(params=["sqlite", "postgres"])
def reader(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "postgres":
        dsn: str = request.getfixturevalue("fresh_dsn")
        sink: Any = PostgresSink(dsn)
        sink.write_many(records())
        sink.close()
        opened: Any = PostgresReader(dsn)
    else:
        path = str(tmp_path / "audit.db")
        sink = SqliteSink(path)
        sink.write_many(records())
        sink.close()
        opened = SqliteReader(path)
    yield opened
    opened.close()


def test_the_database_adds_up_as_the_report_does(reader: Any) -> None:
    expected = grouped(client_records((full(r) for r in records()), None))
    found = sorted_rows(Row(*g) for g in reader.grouped(0.0, None))
    assert [r.as_dict() for r in found] == [r.as_dict() for r in expected]
    assert any(r.estimated for r in found)
    assert any(r.rescues for r in found)
    window = [full(r) for r in records() if DAY + 10 <= r.time < DAY + 40_001]
    assert [r["id"] for r in window] == ["r1", "r2"]
    found = sorted_rows(Row(*g) for g in reader.grouped(DAY + 10, DAY + 40_001))
    assert [r.as_dict() for r in found] == [r.as_dict() for r in grouped(window)]


@pytest.mark.parametrize("key", ["conv-1", "conv-", "c"])
def test_a_conversation_from_its_fields(reader: Any, key: str) -> None:
    everything = [full(r) for r in records()]
    unnamed = record_conversation(everything[0])  # records 0, 3, 6, 9 name none
    for wanted in (key, unnamed[:6]):
        expected = turns(client_records(everything, wanted))
        found = turns(reader.conversation_fields(wanted, 0.0, None))
        assert [r.as_dict() for r in found] == [r.as_dict() for r in expected]
        assert found
