"""`curator report --cache` added up by the database (SQLite, PostgreSQL): the same rows as
a JSONL file added up in Python, no record read whole but those naming no conversation; and
`--csv`."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.cli.main import main as curator
from proxy.observability.audit.entry import AuditRecord, message_digest
from proxy.observability.audit.message_cache import StoredMessage
from proxy.observability.audit.readers.postgres import PostgresReader
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.observability.audit.sinks.postgres_writer import PostgresSink
from proxy.observability.audit.sinks.sqlite import SqliteSink
from proxy.observability.audit.stamps import parse_iso


def record(rid: str, minute: int, route: str, **fields: Any) -> dict[str, Any]:
    return {
        "id": rid,
        "time": f"2030-01-01T10:{minute:02d}:00.000Z",
        "kind": "chat",
        "route": route,
        "model": "claude-sonnet-4-5",
        "original": [{"role": "user", "content": f"task {route}"}],
        **fields,
    }


def miss(cause: str, **rebilled: float) -> dict[str, Any]:
    usd = {c: n * 3.45e-6 for c, n in rebilled.items()}
    return {"cause": cause, "rebilled": rebilled, "rebilled_usd": usd}


RECORDS = [
    record("a1", 0, "agents", conversation="c-1", cache=miss("first_turn"),
           usage={"input": 4000, "cached": 0, "cache_write": 4000, "cache_write_1h": 0}),
    record("a2", 1, "agents", conversation="c-1", cache=miss("curation", curation=2048),
           usage={"input": 4100, "cached": 1920, "cache_write": 2000, "cache_write_1h": 180}),
    # the same conversation on another route later: the conversation's route stays agents
    record("a3", 2, "other", conversation="c-1", cache=miss("client", client=700, curation=5),
           usage={"input": 4200, "cached": 3000, "cache_write": 1.5}),
    # odd values: a float token count, no usage, a cache that is no object
    record("b1", 3, "agents", conversation="c-2", cache=miss("expiry", expiry=99.7)),
    record("b2", 4, "agents", conversation="c-2", cache="gone", usage={"input": True}),
    # older records: no conversation named, derived from their first messages
    record("o1", 5, "old", usage={"input": 10, "cached": 5}),
    record("o2", 6, "old", conversation="", cache=miss("model_change", model_change=3)),
    record("s1", 7, "agents", kind="summarizer", conversation="c-1",
           cache=miss("client", client=10**6)),
]  # fmt: skip


@pytest.fixture
def jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in RECORDS))
    return path


def stored(jsonl: Path, kind: str, request: pytest.FixtureRequest) -> str:
    records = []
    for line in jsonl.read_bytes().splitlines():
        fields = orjson.loads(line)
        data = [orjson.dumps(m, option=orjson.OPT_SORT_KEYS) for m in fields.pop("original")]
        original = tuple(StoredMessage(message_digest(d), d) for d in data)
        records.append(AuditRecord(parse_iso(fields["time"]), fields, original, None))
    if kind == "postgres":
        location: str = request.getfixturevalue("fresh_dsn")
        sink: Any = PostgresSink(location)
    else:
        location = str(jsonl.with_suffix(".db"))
        sink = SqliteSink(location)
    sink.write_many(records)
    sink.close()
    return location


def report(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert curator(["report", "--cache", "--since", "2029-12-31T00:00:00Z", *args]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_the_database_adds_up_as_python_does(
    jsonl: Path,
    kind: str,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    location = stored(jsonl, kind, request)
    expected = {form: report(capsys, "--path", str(jsonl), *form) for form in [("--json",), ()]}
    reader: Any = PostgresReader if kind == "postgres" else SqliteReader

    def whole(_: object) -> dict[str, Any]:
        raise AssertionError("the records were read whole")

    def refused(*_: object) -> Iterator[dict[str, Any]]:
        return map(whole, [None])  # as `between`: it reads only when iterated

    monkeypatch.setattr(reader, "between", refused)
    for form, text in expected.items():
        assert report(capsys, "--path", location, *form) == text
    rows = {(r["scope"], r["key"]): r for r in orjson.loads(expected[("--json",)])}
    c1 = rows[("conversation", "c-1")]
    assert (c1["route"], c1["requests"], c1["rebilled"]) == (
        "agents",
        3,
        {"client": 700, "curation": 2053},
    )
    assert rows[("conversation", "c-2")]["rebilled"] == {"expiry": 99}
    assert rows[("route", "old")]["requests"] == 2
    assert sum(r["requests"] for r in rows.values() if r["scope"] == "route") == 7


def test_csv_has_a_column_per_cause(jsonl: Path, capsys: pytest.CaptureFixture[str]) -> None:
    found = list(csv.DictReader(io.StringIO(report(capsys, "--path", str(jsonl), "--csv"))))
    route = next(r for r in found if (r["scope"], r["key"]) == ("route", "agents"))
    assert (route["requests"], route["rebilled_curation"], route["rebilled_client"]) == (
        "4",
        "2048",
        "0",
    )
    assert float(route["rebilled_usd_curation"]) == pytest.approx(2048 * 3.45e-6)
    assert route["rebilled_usd_client"] == ""
    turns = report(capsys, "--path", str(jsonl), "--csv", "--conversation", "c-1")
    lines = list(csv.DictReader(io.StringIO(turns)))
    assert [(t["key"], t["cause"]) for t in lines] == [
        ("a1", "first_turn"),
        ("a2", "curation"),
        ("a3", "client"),
    ]
