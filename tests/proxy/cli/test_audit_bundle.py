"""`curator audit export --format bundle` and `curator audit import`: a store's records out
as a content-addressed bundle (each message once) and back in, losslessly, on SQLite and
PostgreSQL."""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.cli.main import main as curator
from proxy.observability.audit.entry import AuditRecord, RecordBuilder
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.sqlite import SqliteSink
from tests.factories import audited

TOOLS = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]
SINCE = ("--since", "2000-01-01T00:00:00Z")
BASE = 1_767_225_600.0


def history(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "fix the bug; key sk-proj-" + "a1B2" * 10},
    ]
    for n in range(turns):
        call = {"id": f"c{n}", "type": "function", "function": {"name": "read", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": f"file {n} " * 50})
    return messages


def records() -> list[AuditRecord]:
    """An agent's turns as the writer builds them (its resent history by reference), a
    curated turn, one without tools, and a field no reader knows (it must travel too)."""
    builder = RecordBuilder(Redactor.build(), by_reference=True)
    built = []
    for turn in range(1, 6):
        original = history(turn)
        curated = [*original[:2], *original[-2:]] if turn >= 4 else None
        entry = audited(
            id=f"r{turn}",
            time=BASE + turn,
            route="agents",
            policy="coding",
            model="gpt-4o",
            status=200,
            original=original,
            curated=curated,
            tokens_before=100 * turn,
            tokens_after=60 * turn if curated else 100 * turn,
            body={"tools": TOOLS} if turn != 3 else {},
        )
        record = builder.build(entry)
        if turn == 5:
            record = AuditRecord(
                record.time,
                {**record.fields, "cache": {"novel": [1, 2.5, None]}},
                record.original,
                record.curated,
                record.tools,
                record.remake,
            )
        built.append(record)
    return built


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "audit.db"
    sink = SqliteSink(str(path))
    for record in records():  # one a batch, as a writer under light load
        sink.write_many([record])
    sink.close()
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert curator(["audit", *args]) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def export(capsys: pytest.CaptureFixture[str], location: str, out: Path) -> bytes:
    run(capsys, "export", *SINCE, "--path", location, "--format", "bundle", "-o", str(out))
    return out.read_bytes()


def test_a_bundle_holds_each_message_once_and_imports_back_byte_for_byte(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = export(capsys, str(store), tmp_path / "one.bundle.gz")
    lines = gzip.decompress(first).splitlines()
    assert orjson.loads(lines[0]) == {"curator_audit_bundle": 1, "digest": "blake2b-128"}
    bodies = [orjson.loads(line)["m"] for line in lines if line.startswith(b'{"m"')]
    assert len(bodies) == len(set(bodies))
    conn = sqlite3.connect(store)
    assert len(bodies) == conn.execute("SELECT count(*) FROM messages").fetchone()[0]
    copy = tmp_path / "copy.db"
    run(capsys, "import", str(tmp_path / "one.bundle.gz"), "--path", str(copy))
    assert export(capsys, str(copy), tmp_path / "two.bundle.gz") == first
    jsonl = run(capsys, "export", *SINCE, "--path", str(store))
    assert run(capsys, "export", *SINCE, "--path", str(copy)) == jsonl
    assert orjson.loads(jsonl.splitlines()[-1])["cache"] == {"novel": [1, 2.5, None]}
    assert orjson.loads(jsonl.splitlines()[0])["tools"] == TOOLS


def test_the_same_records_to_postgresql_and_back(
    store: Path, tmp_path: Path, fresh_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "from-sqlite.bundle.gz"
    export(capsys, str(store), bundle)
    run(capsys, "import", str(bundle), "--path", fresh_dsn)
    jsonl = run(capsys, "export", *SINCE, "--path", str(store))
    assert run(capsys, "export", *SINCE, "--path", fresh_dsn) == jsonl
    again = export(capsys, fresh_dsn, tmp_path / "from-pg.bundle.gz")
    run(capsys, "import", str(tmp_path / "from-pg.bundle.gz"), "--path", fresh_dsn, "--append")
    assert run(capsys, "export", *SINCE, "--path", fresh_dsn) == jsonl, "imported once"
    assert export(capsys, fresh_dsn, tmp_path / "twice.bundle.gz") == again


def test_a_jsonl_store_exports_a_bundle_as_its_sqlite_twin_would(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jsonl = tmp_path / "audit.jsonl"
    jsonl.write_text(run(capsys, "export", *SINCE, "--path", str(store)))
    bundle = tmp_path / "from-jsonl.bundle.gz"
    run(capsys, "export", *SINCE, "--path", str(jsonl), "--format", "bundle", "-o", str(bundle))
    copy = tmp_path / "copy.db"
    run(capsys, "import", str(bundle), "--path", str(copy))
    assert run(capsys, "export", *SINCE, "--path", str(copy)) == jsonl.read_text()


def test_what_import_refuses(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = tmp_path / "b.gz"
    export(capsys, str(store), bundle)
    assert curator(["audit", "import", str(bundle), "--path", str(store)]) == 1
    assert "already holds records" in capsys.readouterr().err
    lines = gzip.decompress(bundle.read_bytes()).splitlines()
    at = next(i for i, line in enumerate(lines) if b"file 0" in line)
    lines[at] = lines[at].replace(b"file 0", b"file 9")
    bundle.write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    assert curator(["audit", "import", str(bundle), "--path", str(tmp_path / "new.db")]) == 1
    assert f"line {at + 1}: message" in capsys.readouterr().err
    bundle.write_bytes(gzip.compress(b"\n".join([lines[0], *lines[at + 1 :]]) + b"\n"))
    assert curator(["audit", "import", str(bundle), "--path", str(tmp_path / "new2.db")]) == 1
    assert "is not in the bundle" in capsys.readouterr().err
    bundle.write_bytes(b"not gzip")
    assert curator(["audit", "import", str(bundle), "--path", str(tmp_path / "new3.db")]) == 1
    assert "not a complete gzip file" in capsys.readouterr().err
