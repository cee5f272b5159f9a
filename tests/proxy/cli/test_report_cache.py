"""`curator report --cache`: hit rate, re-billed tokens and dollars by cause, write
amplification, per route and conversation, and per turn of one conversation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.cli.main import main as curator
from tests.proxy.cli.test_report_cache_sql import stored


def record(rid: str, minute: int, conversation: str, cache: dict[str, Any], **usage: int) -> Any:
    return {
        "id": rid,
        "time": f"2030-01-01T10:{minute:02d}:00.000Z",
        "kind": "chat",
        "route": "agents",
        "policy": "coding",
        "model": "gpt-4o",
        "conversation": conversation,
        "usage": {"input": 4000, "cached": 0, "output": 10, "cache_write": 0, **usage},
        "cache": cache,
        "original": [{"role": "user", "content": "hi"}],
    }


def miss(cause: str, at: dict[str, Any] | None = None, **rebilled: int) -> dict[str, Any]:
    usd = {c: n * 1.25e-6 for c, n in rebilled.items()}
    return {"cause": cause, "diverged_at": at, "rebilled": rebilled, "rebilled_usd": usd}


CUT = {"prompt": "curated", "element": "message", "index": 3}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    records = [
        record("a1", 0, "c-1", miss("first_turn"), cache_write=4000),
        record("a2", 1, "c-1", miss("curation", CUT, curation=2048), cached=1920, cache_write=2000),
        record("a3", 2, "c-1", miss("none"), cached=3968),
        record("b1", 3, "c-2", miss("client", None, client=1024, curation=512), cached=1024),
    ]
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def report(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert curator(["report", "--cache", "--since", "2029-12-31T00:00:00Z", *args]) == 0
    return capsys.readouterr().out


def test_rows_per_route_and_conversation(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = orjson.loads(report(capsys, "--path", str(store), "--json"))
    by = {(r["scope"], r["key"]): r for r in rows}
    route = by[("route", "agents")]
    assert route["requests"] == 4
    assert route["rebilled"] == {"curation": 2560, "client": 1024}
    assert route["rebilled_usd"]["curation"] == pytest.approx(2560 * 1.25e-6)
    assert route["hit_rate"] == pytest.approx((1920 + 3968 + 1024) / 16000)
    first = by[("conversation", "c-1")]
    assert first["amplification"] == pytest.approx(6000 / (1920 + 3968))
    assert by[("conversation", "c-2")]["amplification"] == 0.0


def test_the_text_table(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = report(capsys, "--path", str(store))
    head, route, *conversations = text.splitlines()
    assert head.split()[:4] == ["SCOPE", "KEY", "ROUTE", "REQS"]
    assert "CURATION" in head
    assert route.split()[:4] == ["route", "agents", "agents", "4"]
    assert len(conversations) == 2


def test_per_turn_with_the_cause_and_where_it_parted(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = report(capsys, "--path", str(store), "--conversation", "c-1")
    lines = text.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["a1", "a2", "a3"]
    assert re.search(r"curation\s+curated message 3\s", lines[2]), lines[2]
    rows = orjson.loads(report(capsys, "--path", str(store), "--conversation", "c-1", "--json"))
    assert [r["cause"] for r in rows] == ["first_turn", "curation", "none"]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_every_store_keeps_the_cache_field_and_reports_it_alike(
    store: Path, kind: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    location = stored(store, kind, request)
    for extra in (("--json",), ("--json", "--conversation", "c-1"), ()):
        from_jsonl = report(capsys, "--path", str(store), *extra)
        assert report(capsys, "--path", location, *extra) == from_jsonl
