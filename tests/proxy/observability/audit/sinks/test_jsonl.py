from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.readers.jsonl import JsonlReader
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.jsonl import JsonlSink
from tests.factories import audited

KEY = "sk-ant-api03-" + "Lm9_Np8-" * 8
T0 = 1_767_225_600.0


def build(rid: str, at: float = T0) -> bytes:
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": f"key {KEY}"}]
    entry = audited(id=rid, time=at, route="r", original=messages)
    return RecordBuilder(Redactor.build()).build(entry).to_json()


def test_lines_are_self_contained_and_redacted(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    builder = RecordBuilder(Redactor.build())
    sink = JsonlSink(str(path))
    original = [{"role": "user", "content": f"key {KEY}"}, {"role": "user", "content": "more"}]
    sink.write(builder.build(audited(id="a", time=T0, original=original)))
    sink.write(builder.build(audited(id="b", time=T0 + 1, original=original, curated=original[1:])))
    sink.close()
    raw = path.read_bytes()
    assert KEY.encode() not in raw
    lines = [json.loads(line) for line in raw.splitlines()]
    assert [r["id"] for r in lines] == ["a", "b"]
    assert lines[0]["original"][0]["content"] == "key [REDACTED:anthropic_key]"
    assert lines[0]["curated"] == lines[0]["original"]
    assert lines[1]["curated"] == [{"content": "more", "role": "user"}]
    assert path.stat().st_mode & 0o777 == 0o600


def test_dash_means_stdout(capfd: pytest.CaptureFixture[str]) -> None:
    sink = JsonlSink("-")
    sink.write(RecordBuilder(Redactor.build()).build(audited(id="out", time=T0)))
    sink.close()
    out = capfd.readouterr().out
    assert json.loads(out)["id"] == "out"
    assert out.endswith("\n")


def test_unwritable_path_raises_for_the_writer_to_count(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    sink = JsonlSink(str(blocker / "audit.jsonl"))
    with pytest.raises(NotADirectoryError):
        sink.write(RecordBuilder(Redactor.build()).build(audited(id="x", time=T0)))


APPEND_SCRIPT = """
import sys
from proxy.observability.audit.sinks.jsonl import JsonlSink
from proxy.observability.audit.entry import RecordBuilder
from tests.factories import audited
from proxy.observability.audit.redact import Redactor

path, name = sys.argv[1], sys.argv[2]
builder = RecordBuilder(Redactor.build())
sink = JsonlSink(path)
for i in range(60):
    messages = [{"role": "user", "content": (name + " ") * 6000}]
    sink.write(builder.build(audited(id=f"{name}-{i}", time=1.0, original=messages)))
sink.close()
"""


def test_several_processes_never_interleave_lines(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    procs = [
        subprocess.Popen([sys.executable, "-c", APPEND_SCRIPT, str(path), name])
        for name in ("alpha", "beta", "gamma")
    ]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    lines = path.read_bytes().splitlines()
    assert len(lines) == 180
    records = [json.loads(line) for line in lines]  # raises if any two lines were mixed
    for rec in records:
        name = rec["id"].split("-")[0]
        assert rec["original"][0]["content"] == (name + " ") * 6000
    assert len({r["id"] for r in records}) == 180


def test_reader_lists_gets_and_filters_by_time(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(
        build("req-1", T0)
        + b"\n"
        + build("req-2", T0 + 60)
        + b"\n"
        + b'{"id": "odd", "time": "yesterday"}\n'
        + build("other", T0 + 120)
        + b"\n"
        + b'{"id": "cut short by a cra'
    )
    reader = JsonlReader(str(path))
    summaries = reader.summaries(limit=2)
    assert [s["id"] for s in summaries] == ["other", "req-2"]
    assert summaries[0]["messages"] == 2
    assert "original" not in summaries[0]
    assert [s["id"] for s in reader.summaries(limit=5, route="nope")] == []
    found = reader.get("req-2")
    assert found is not None
    assert found["original"][1]["content"] == "key [REDACTED:anthropic_key]"
    assert reader.get("oth") is not None
    with pytest.raises(LookupError):
        reader.get("req")
    assert [r["id"] for r in reader.between(T0 + 30, T0 + 120)] == ["req-2"]
    reader.close()


def test_reader_needs_an_existing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        JsonlReader(str(tmp_path / "missing.jsonl"))
