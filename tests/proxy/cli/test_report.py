"""`curator report` and `curator audit list --conversation` over a JSONL audit store (and
`curator report` over PostgreSQL)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.cli.main import main as curator
from proxy.observability.audit.entry import AuditRecord, message_digest
from proxy.observability.audit.message_cache import StoredMessage
from proxy.observability.audit.sinks.postgres_writer import PostgresSink
from proxy.observability.audit.sinks.sqlite import SqliteSink
from proxy.observability.audit.stamps import parse_iso


def record(
    rid: str, time: str, *, conversation: str = "c-1", cached: int = 0, **extra: Any
) -> dict[str, Any]:
    return {
        "id": rid,
        "time": time,
        "kind": "chat",
        "route": "agents",
        "policy": "coding",
        "model": "gpt-4o",
        "status": 200,
        "tokens_before": 3000,
        "tokens_after": 2000,
        "skip_reason": None,
        "conversation": conversation,
        "usage": {"input": 2000, "cached": cached, "output": 100, "reasoning": 0},
        "cost": {"price": "gpt-4o*", "actual_usd": 0.006, "uncurated_usd": 0.009},
        "original": [{"role": "user", "content": "hi"}],
        "curated": [{"role": "user", "content": "hi"}],
        **extra,
    }


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "audit.jsonl"
    records = [
        record("a1", "2030-01-01T10:00:00.000Z"),
        record("a2", "2030-01-01T10:01:00.000Z", cached=1024),
        record("a3", "2030-01-01T10:02:00.000Z", skip_reason="invalid_json", rescued=True),
        record("b1", "2030-01-02T09:00:00.000Z", conversation="c-2", cached=1536),
        {**record("s1", "2030-01-01T10:00:30.000Z"), "kind": "summarizer"},
    ]
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert curator(list(args)) == 0
    return capsys.readouterr().out


SINCE = ("--since", "2029-12-31T00:00:00Z")


def test_report_groups_by_route_policy_model_and_day(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = orjson.loads(run(capsys, "report", "--path", str(store), *SINCE, "--json"))
    assert [(r["day"], r["requests"]) for r in rows] == [("2030-01-01", 3), ("2030-01-02", 1)]
    first = rows[0]
    assert (first["route"], first["policy"], first["model"]) == ("agents", "coding", "gpt-4o")
    assert (first["tokens_before"], first["tokens_after"]) == (9000, 6000)
    assert first["cache_hit_ratio"] == pytest.approx(1024 / 6000)
    assert first["actual_usd"] == pytest.approx(0.018)
    assert first["uncurated_usd"] == pytest.approx(0.027)
    assert first["savings_usd"] == pytest.approx(0.009)
    assert (first["skips"], first["rescues"]) == (1, 1)


def test_report_text_and_csv(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = run(capsys, "report", "--path", str(store), *SINCE)
    header, first = text.splitlines()[:2]
    assert header.split()[:4] == ["DAY", "ROUTE", "POLICY", "MODEL"]
    assert "17.1%" in first
    assert "0.0090" in first
    table = list(
        csv.DictReader(io.StringIO(run(capsys, "report", "--path", str(store), *SINCE, "--csv")))
    )
    assert [r["requests"] for r in table] == ["3", "1"]
    assert float(table[1]["cache_hit_ratio"]) == pytest.approx(1536 / 2000)


def test_an_estimated_uncurated_cost_is_marked_with_its_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    estimate = {"reason": "encrypted_reasoning", "learned": True, "usd_range": [0.005, 0.012]}
    cost = {"price": "gpt-4o*", "actual_usd": 0.006, "uncurated_usd": 0.007}
    records = [
        record("e1", "2030-01-01T10:00:00.000Z", cost={**cost, "uncurated_estimate": estimate}),
        record("e2", "2030-01-01T10:01:00.000Z"),  # exact: 0.009 at both ends
    ]
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    rows = orjson.loads(run(capsys, "report", "--path", str(path), *SINCE, "--json"))
    assert rows[0]["estimated"] == 1
    assert rows[0]["uncurated_usd"] == pytest.approx(0.016)
    low, high = rows[0]["uncurated_low_usd"], rows[0]["uncurated_high_usd"]
    assert (low, high) == (pytest.approx(0.014), pytest.approx(0.021))
    text = run(capsys, "report", "--path", str(path), *SINCE)
    assert "~0.0160 [0.0140-0.0210]" in text.splitlines()[1]
    assert text.splitlines()[-1].startswith("~ an estimate")


def test_report_of_one_conversation_is_its_turns(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ("report", "--path", str(store), *SINCE, "--conversation", "c-1", "--json")
    rows = orjson.loads(run(capsys, *args))
    assert [r["id"] for r in rows] == ["a1", "a2", "a3"]
    assert [r["cache_hit_ratio"] for r in rows] == [0.0, pytest.approx(0.512), 0.0]


def test_audit_list_by_conversation(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = run(capsys, "audit", "list", "--path", str(store), "--conversation", "c-1", "--json")
    rows = [orjson.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in rows] == ["a1", "s1", "a2", "a3"], "oldest first, b1 left out"
    assert "original" not in rows[0]
    assert rows[0]["messages"] == 1


def test_report_says_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert curator(["report", "--path", str(tmp_path / "none.db")]) == 1
    assert "curator report: cannot read audit store" in capsys.readouterr().err
    assert curator(["report", "--path", str(tmp_path), "--since", "yesterday"]) == 1
    assert "expected an ISO time" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_report_reads_every_store_as_it_reads_jsonl(
    store: Path, kind: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store is opened through the reader registry (a postgresql:// URL works), and the
    same records give the same table, JSON and CSV whichever store holds them."""

    def stored(messages: list[Any]) -> tuple[StoredMessage, ...]:
        data = [orjson.dumps(m, option=orjson.OPT_SORT_KEYS) for m in messages]
        return tuple(StoredMessage(message_digest(d), d) for d in data)

    records = []
    for line in store.read_bytes().splitlines():
        fields = orjson.loads(line)
        original, curated = stored(fields.pop("original")), stored(fields.pop("curated"))
        records.append(AuditRecord(parse_iso(fields["time"]), fields, original, curated))
    if kind == "postgres":
        location: str = request.getfixturevalue("fresh_dsn")
        sink: Any = PostgresSink(location)
    else:
        location = str(store.with_suffix(".db"))
        sink = SqliteSink(location)
    sink.write_many(records)
    sink.close()
    for extra in ((), ("--json",), ("--csv",), ("--json", "--conversation", "c-1")):
        args = ("report", *SINCE, *extra)
        from_jsonl = run(capsys, *args, "--path", str(store))
        assert run(capsys, *args, "--path", location) == from_jsonl
        assert from_jsonl.strip()
