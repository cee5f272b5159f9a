from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from policies.base import Action
from policies.messages import SUMMARY_PREFIX
from proxy.cli.audit_render import render_diff
from proxy.cli.main import main
from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.readers.query import parse_time
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.jsonl import JsonlSink
from proxy.observability.audit.sinks.sqlite import SqliteSink
from proxy.observability.exchange import ExchangeRecord
from tests.factories import audited

KEY = "sk-" + "T3BlbkFJ" * 6
TOOL_OUTPUT = "".join(f"line {i}: ok\n" for i in range(200))
KEPT = "".join(f"line {i}: ok\n" for i in range(10))
SHORT = KEPT + "[... 190 lines removed ...]"


def chat_entry(at: float) -> ExchangeRecord:
    original: list[dict[str, Any]] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "old question"},
        {"role": "assistant", "content": "old answer"},
        {"role": "user", "content": "run the tool"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": TOOL_OUTPUT},
        {"role": "user", "content": f"latest question, key {KEY}"},
    ]
    curated = [*original[:1], *original[3:5], {**original[5], "content": SHORT}, original[6]]
    actions = [
        Action("turn_window", "drop", (1, 2), 8, "more than 2 turns"),
        # Indexes refer to this curator's input: 3 is original[5] once turn_window ran.
        Action("tool_result_truncation", "truncate", (3,), 900, "tool output over 100 tokens"),
    ]
    return audited(
        id="req-aaa111",
        time=at,
        route="agents",
        policy="coding",
        model="gpt-4o",
        original=original,
        curated=curated,
        actions=actions,
        tokens_before=1200,
        tokens_after=300,
        status=200,
        response=f"Done. Your key {KEY} is set.",
    )


def entries(now: float) -> list[ExchangeRecord]:
    return [
        chat_entry(now - 600),
        audited(
            id="req-bbb222",
            time=now - 500,
            route="default",
            policy="chat",
            skip_reason="invalid_json",
            status=400,
        ),
        audited(
            id="req-aaa111.s1",
            time=now - 400,
            kind="summarizer",
            parent_id="req-aaa111",
            route="agents",
            original=[{"role": "user", "content": "Summarize: old question / old answer"}],
            response="The user asked an old question.",
        ),
    ]


@pytest.fixture
def now() -> float:
    return time.time()


@pytest.fixture
def store(tmp_path: Path, now: float) -> str:
    path = tmp_path / "audit.db"
    sink = SqliteSink(str(path))
    builder = RecordBuilder(Redactor.build())
    for item in entries(now):
        sink.write(builder.build(item))
    sink.close()
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["audit", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_list_shows_newest_first(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "list", "--path", store)
    assert status == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "TIME", "ID", "KIND", "ROUTE", "POLICY", "MODEL", "STATUS", "TOKENS", "RESULT",
    ]  # fmt: skip
    assert [line.split()[1] for line in lines[1:]] == ["req-aaa111.s1", "req-bbb222", "req-aaa111"]
    assert lines[2].endswith("skipped: invalid_json")
    assert "1200 -> 300" in lines[3]
    assert lines[3].endswith("turn_window=2,tool_result_truncation=1")


def test_list_filters_limits_and_prints_json(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = run(capsys, "list", "--path", store, "--route", "agents", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in rows] == ["req-aaa111.s1", "req-aaa111"]
    assert rows[1]["messages"] == 7
    assert rows[1]["curated_messages"] == 5
    _, out, _ = run(capsys, "list", "--path", store, "--limit", "1")
    assert len(out.splitlines()) == 2
    assert run(capsys, "list", "--path", store, "--limit", "0")[0] == 1


def test_show_prints_the_full_record_redacted(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(capsys, "show", "req-aaa111", "--path", store)
    assert status == 0
    assert KEY not in out
    assert "original messages (7):" in out
    assert "curated messages (5):" in out
    assert "  [6] user:\n      latest question, key [REDACTED:openai_key]" in out
    assert "      -> ls({}) id=call_1" in out
    assert "    Done. Your key [REDACTED:openai_key] is set." in out
    assert "tokens:         1200 -> 300" in out


def test_show_json_and_prefix_lookup(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "show", "req-bbb", "--json", "--path", store)
    assert status == 0
    record = json.loads(out)
    assert (record["id"], record["skip_reason"], record["original"]) == (
        "req-bbb222",
        "invalid_json",
        [],
    )
    status, _, err = run(capsys, "show", "req-aaa", "--path", store)
    assert status == 1
    assert "several records have ids starting with 'req-aaa'" in err


def test_diff_says_what_each_curator_did(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "diff", "req-aaa111", "--path", store)
    assert status == 0
    lines = out.splitlines()
    assert lines[:2] == [
        "req-aaa111  route=agents  policy=coding",
        "tokens 1200 -> 300, messages 7 -> 5",
    ]
    assert "  [1] user         dropped    12 chars  by turn_window" in lines
    assert "  [2] assistant    dropped    10 chars  by turn_window" in lines
    shortened = next(line for line in lines if line.startswith("  [5] tool"))
    assert shortened.split() == [
        "[5]", "tool", "shortened", str(len(TOOL_OUTPUT)), "->", str(len(SHORT)), "chars", "by",
        "tool_result_truncation",
    ]  # fmt: skip
    assert f"      kept the first {len(KEPT)} and the last 0 chars" in lines
    assert "      --- original[5]" in lines
    assert "      +++ curated[3]" in lines
    assert "      -line 10: ok" in lines
    assert "      +[... 190 lines removed ...]" in lines
    assert "      -... 187 more lines" in lines
    assert lines[-1] == "4 of 7 messages unchanged"


def test_diff_of_an_unchanged_request(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "diff", "req-bbb222", "--path", store)
    assert "curation was skipped: invalid_json" in out
    assert out.splitlines()[-1] == "0 of 0 messages unchanged"


def test_export_by_duration_and_iso_time(
    store: str, now: float, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(capsys, "export", "--since", "1h", "--path", store)
    assert status == 0
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["id"] for r in records] == ["req-aaa111", "req-bbb222", "req-aaa111.s1"]
    assert records[0]["curated"][3]["content"].endswith("[... 190 lines removed ...]")
    assert KEY not in out
    _, out, _ = run(capsys, "export", "--since", "2h", "--until", "450s", "--path", store)
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["req-aaa111", "req-bbb222"]
    since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 450))
    _, out, _ = run(capsys, "export", "--since", since, "--path", store)
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["req-aaa111.s1"]


def test_errors_are_one_line_and_exit_1(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = run(capsys, "export", "--since", "last tuesday", "--path", store)
    assert (status, err) == (
        1,
        "curator audit: expected an ISO time (2025-01-31T12:00:00Z) or a duration "
        "(30m, 1h, 2d), got 'last tuesday'\n",
    )
    status, _, err = run(capsys, "show", "nope", "--path", store)
    assert (status, err) == (1, "curator audit: no audit record with id 'nope'\n")
    status, _, err = run(capsys, "list", "--path", str(tmp_path / "missing.db"))
    assert status == 1
    assert err.startswith("curator audit: cannot read audit store")


def test_store_is_found_through_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "config.yaml").write_text("audit:\n  path: data/audit.db\n")
    sink = SqliteSink(str(tmp_path / "data" / "audit.db"))
    sink.write(RecordBuilder(Redactor.build()).build(audited(id="via-config", time=1.0)))
    sink.close()
    _, out, _ = run(capsys, "list", "--config", str(tmp_path / "config.yaml"))
    assert "via-config" in out
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    status, _, err = run(capsys, "list")
    assert status == 1
    assert str(elsewhere / "curator-audit.db") in err  # no config here: the default store
    monkeypatch.chdir(tmp_path)
    _, out, _ = run(capsys, "list")  # ./config.yaml is the default config
    assert "via-config" in out


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("audit: {sink: none}\n", "audit: {sink: none}"),
        ("audit: {sink: jsonl, path: '-'}\n", "stdout"),
        ("audit: {max_queue: many}\n", "audit.max_queue: expected an integer"),
    ],
)
def test_configs_that_name_no_readable_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, message: str
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(config)
    status, _, err = run(capsys, "list", "--config", str(path))
    assert status == 1
    assert message in err


def test_jsonl_stores_are_read_too(
    tmp_path: Path, now: float, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "audit.jsonl"
    sink = JsonlSink(str(path))
    builder = RecordBuilder(Redactor.build())
    for item in entries(now):
        sink.write(builder.build(item))
    sink.close()
    _, out, _ = run(capsys, "list", "--path", str(path))
    assert [line.split()[1] for line in out.splitlines()[1:]] == [
        "req-aaa111.s1",
        "req-bbb222",
        "req-aaa111",
    ]
    _, out, _ = run(capsys, "diff", "req-aaa111", "--path", str(path))
    assert "  [1] user         dropped    12 chars  by turn_window" in out.splitlines()


def test_parse_time() -> None:
    assert parse_time("90m", now=10_000.0) == 10_000.0 - 5400
    assert parse_time("1.5h", now=10_000.0) == 10_000.0 - 5400
    assert parse_time("1970-01-01T01:00:00Z", now=0.0) == 3600.0
    with pytest.raises(ValueError, match="duration"):
        parse_time("soon", now=0.0)


def test_diff_replays_a_summary_to_blame_later_curators() -> None:
    original = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "a1"},
        {"role": "user", "content": "u2"},
        {"role": "assistant", "content": "a long answer " * 20},
        {"role": "user", "content": "u3"},
    ]
    summary = {"role": "user", "content": SUMMARY_PREFIX + "]: u1, a1, u2"}
    curated = [original[0], summary, {**original[4], "content": "a long answer [...]"}, original[5]]
    actions = [
        {"curator": "summarizer", "kind": "summarize", "indexes": [1, 2, 3], "reason": "old"},
        # After the summary replaced 1-3, original[4] sits at index 2.
        {"curator": "token_budget", "kind": "truncate", "indexes": [2], "reason": "budget"},
    ]
    record = {"id": "s", "original": original, "curated": curated, "actions": actions}
    lines = render_diff(record).splitlines()
    assert "  [1] user         dropped    2 chars  by summarizer" in lines
    assert "  [3] user         dropped    2 chars  by summarizer" in lines
    assert "  [4] assistant    shortened  280 -> 19 chars  by token_budget" in lines
    assert f"  summary inserted as curated[1]: {len(summary['content'])} chars" in lines
    assert lines[-1] == "2 of 6 messages unchanged"


def test_diff_without_actions_falls_back_to_matching_messages() -> None:
    original = [
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "reply"},
        {"role": "user", "content": "second"},
    ]
    lines = render_diff({"id": "x", "original": original, "curated": original[2:]}).splitlines()
    assert lines[-3:] == [
        "  [0] user         dropped    5 chars",
        "  [1] assistant    dropped    5 chars",
        "1 of 3 messages unchanged",
    ]
