"""`curator simulate`: reading requests liberally, reporting curation and prefix-cache cost."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from policies.base import CurationContext, CuratorOutput
from policies.messages import Message
from policies.prefix_cache import PrefixCache, prompt_of
from policies.registry import CURATORS
from policies.tokens import TokenCounter
from proxy.cli import simulate
from proxy.cli.main import main
from proxy.cli.simulate_model import Options
from proxy.config.loader import Config, load_config
from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.redact import Redactor
from tests.factories import assistant_calls, audited, long_text, system, tokens, tool_result, user

Msg = dict[str, Any]

CONFIG = """\
upstreams:
  main: {base_url: "https://upstream.test/v1", api_key: sk-test}
models:
  "small-*": {context_window: 2000, encoding: o200k_base}
policies:
  agents:
    reserve_output_tokens: 200
    curators:
      - system_preservation: {}
      - tool_result_truncation: {max_tokens: 100, keep_recent: 1}
      - token_budget: {}
      - tool_pair_coherence: {}
  strict:
    {context_window: 300, reserve_output_tokens: 0, on_overflow: reject, curators: [token_budget]}
  summarizing:
    reserve_output_tokens: 200
    curators:
      - summarizer:
          {upstream: main, model: small-summarizer, trigger_tokens: 600, max_summary_tokens: 200}
  "off": {curators: []}
routes:
  - {name: agents, match: {model: "small-*"}, upstream: main, policy: agents}
  - {name: default, upstream: main, policy: "off"}
"""


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG)
    return path


@pytest.fixture
def config(config_path: Path) -> Config:
    return load_config(config_path)


def conversation(results: int = 3, model: str = "small-agent") -> Msg:
    messages: list[Msg] = [system("You are a coding agent."), user("Fix the failing test.")]
    for k in range(results):
        messages += [assistant_calls(f"c{k}"), tool_result(f"c{k}", long_text(300, f"w{k}x"))]
    return {"model": model, "messages": [*messages, user("What now?")]}


def write(tmp_path: Path, name: str, *items: object, pretty: bool = False) -> Path:
    path = tmp_path / name
    if pretty:
        path.write_text(json.dumps(items[0], indent=2))
    else:
        path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def simulate_cli(
    capsys: pytest.CaptureFixture[str], config_path: Path, *args: str
) -> tuple[int, str, str]:
    code = main(["simulate", "--config", str(config_path), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_json_request_is_reported_with_actions_tokens_and_cost(
    tmp_path: Path, config_path: Path, config: Config, capsys: pytest.CaptureFixture[str]
) -> None:
    body = conversation()
    path = write(tmp_path, "request.json", body, pretty=True)
    code, out, err = simulate_cli(capsys, config_path, str(path))
    assert (code, err) == (0, "")
    counter = TokenCounter(config.models)
    expected = config.policies["agents"].curate(body["messages"], body, counter)
    assert [a.indexes for a in expected.actions] == [(3,), (5,)]
    lines = out.splitlines()
    assert lines[0] == f"curator simulate: requests from {path}"
    assert lines[2] == "request 1 (line 1): model small-agent, route agents, policy agents"
    assert lines[3] == (
        "  budget: window 2,000 - reply 200 - tools 0 - margin 20 = 1,780 tokens for messages"
    )
    assert lines[4].startswith(
        f"  tokens: {expected.tokens_before:,} -> {expected.tokens_after:,} ("
    )
    for action, line in zip(expected.actions, lines[5:7], strict=True):
        assert line == (
            f"  tool_result_truncation truncate [{action.indexes[0]}] "
            f"-{action.tokens_removed:,}: {action.reason}"
        )
    before, after = expected.tokens_before, expected.tokens_after
    share = f"{after / 1780:.1%}"
    assert lines[7] == f"  budget use: {share} of the budget (after tool_result_truncation {share})"
    # A first request has nothing cached: it costs one unit per input token.
    assert lines[8].split() == f"original: {before:,} input, 0 cached -> {before:,}.0 units".split()
    assert lines[9].split() == f"curated: {after:,} input, 0 cached -> {after:,}.0 units".split()
    assert "total: 1 request(s), 0 rejected, 0 skipped" in out
    assert "  actions: tool_result_truncation=2\n" in out


def test_json_output_carries_the_same_numbers(
    tmp_path: Path, config_path: Path, config: Config, capsys: pytest.CaptureFixture[str]
) -> None:
    body = conversation()
    path = write(tmp_path, "request.json", body)
    code, out, _ = simulate_cli(capsys, config_path, str(path), "--json")
    assert code == 0
    data = json.loads(out)
    counter = TokenCounter(config.models)
    expected = config.policies["agents"].curate(body["messages"], body, counter)
    (request,) = data["requests"]
    assert request["route"] == "agents"
    assert request["policy"] == "agents"
    assert request["budget"] == {
        "context_window": 2000, "reserve_output": 200, "tools": 0, "messages": 1780, "margin": 20,
            "scale": 1.0,
    }  # fmt: skip
    assert request["tokens_before"] == expected.tokens_before
    assert request["tokens_after"] == expected.tokens_after < expected.tokens_before
    assert [a["indexes"] for a in request["actions"]] == [[3], [5]]
    assert [a["tokens_removed"] for a in request["actions"]] == [
        a.tokens_removed for a in expected.actions
    ]
    # The prompt is the messages plus reply priming (no tools here), nothing cached yet.
    assert request["cost"]["original"] == {
        "input_tokens": expected.tokens_before,
        "cached_tokens": 0,
        "cost": expected.tokens_before,
    }
    assert request["cost"]["curated"]["input_tokens"] == expected.tokens_after
    assert data["pricing"] == {"cached_price": 0.1, "min_tokens": 1024, "increment": 128}
    assert data["total"]["curated"]["cost"] == expected.tokens_after
    assert "diff" not in request
    assert request["summarizer"] is None  # no summarizer in this policy


def test_a_jsonl_conversation_is_priced_with_the_prefix_cache(
    tmp_path: Path, config_path: Path, config: Config, capsys: pytest.CaptureFixture[str]
) -> None:
    base = [system(long_text(600, "rule")), user("Start.")]
    r1 = {"model": "other", "messages": base}
    step = [assistant_calls("c1"), tool_result("c1", long_text(200, "out"))]
    r2 = {"model": "other", "messages": [*base, *step]}
    r3 = {"model": "other", "messages": [*r2["messages"], user("Go on.")]}
    path = write(tmp_path, "conversation.jsonl", r1, r2, r3)
    code, out, _ = simulate_cli(capsys, config_path, str(path), "--json")
    assert code == 0
    data = json.loads(out)
    assert [r["route"] for r in data["requests"]] == ["default"] * 3
    assert [r["line"] for r in data["requests"]] == [1, 2, 3]
    counter = TokenCounter(config.models)
    prompts = [prompt_of(r["messages"], counter, "other") for r in (r1, r2, r3)]
    expected = PrefixCache().price(prompts)
    # Each request shares all of its predecessor but the reply priming.
    shared = [p.tokens - p.blocks[-1].tokens for p in prompts[:2]]
    assert 1024 < shared[0] < shared[1] - 128
    cached = [r["cost"]["original"]["cached_tokens"] for r in data["requests"]]
    assert cached == [0, *(PrefixCache().cacheable(n) for n in shared)]
    assert cached == [r.cached_tokens for r in expected.requests]
    assert data["total"]["original"]["cost"] == pytest.approx(expected.cost)
    assert data["total"]["curated"] == data["total"]["original"]  # the "off" policy


def test_audit_records_and_wrapped_requests_are_accepted(
    tmp_path: Path, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = conversation(results=1)
    record = {"id": "r1", "kind": "chat", "model": "small-agent", "original": body["messages"]}
    summary_call = {"id": "r2", "kind": "summarizer", "model": "x", "original": []}
    wrapped = {"request": {"messages": body["messages"]}, "model": "other"}
    path = write(tmp_path, "export.jsonl", record, summary_call, wrapped)
    code, out, _ = simulate_cli(capsys, config_path, str(path), "--json")
    assert code == 0
    requests = json.loads(out)["requests"]
    assert [(r["line"], r["model"], r["route"]) for r in requests] == [
        (1, "small-agent", "agents"),
        (3, "other", "default"),
    ]


def test_a_bare_message_array_is_one_request_and_stdin_works(
    config_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = conversation()["messages"]
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(messages)))
    code, out, _ = simulate_cli(capsys, config_path, "-", "--model", "small-x")
    assert code == 0
    assert out.startswith("curator simulate: requests from standard input\n")
    assert "model small-x, route agents, policy agents" in out


def test_diff_shows_a_unified_diff_of_the_messages(
    tmp_path: Path, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, "conversation.jsonl", conversation(), conversation(model="other"))
    code, out, _ = simulate_cli(capsys, config_path, str(path), "--diff")
    assert code == 0
    first, second = out.split("request 2 ")
    assert "\n--- original\n+++ curated\n@@ " in first
    assert "\n   w0x0 w0x1" not in first  # not a context line: the old result was cut
    assert "\n-  w0x0 w0x1 w0x2" in first
    assert any(
        line.startswith("+") and "tokens truncated by context-curator" in line
        for line in first.splitlines()
    )
    assert "\n-  w2x0" not in first  # the newest result is kept whole
    assert "(no difference)" in second
    code, out, _ = simulate_cli(capsys, config_path, str(path), "--diff", "--json")
    diffs = [r["diff"] for r in json.loads(out)["requests"]]
    assert diffs[0].startswith("--- original\n+++ curated\n@@ ")
    assert diffs[1] == "(no difference)"


@pytest.mark.parametrize(
    ("args", "header", "changed"),
    [
        ((), "route agents, policy agents", True),
        (("--route", "default"), "route default, policy off", False),
        (("--policy", "agents"), "policy agents", True),
        (("--policy", "preset:passthrough"), "policy preset:passthrough", False),
        (("--model", "gpt-4o"), "model gpt-4o, route default, policy off", False),
    ],
)
def test_route_and_policy_selection(
    tmp_path: Path,
    config_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    header: str,
    changed: bool,
) -> None:
    path = write(tmp_path, "request.json", conversation())
    code, out, _ = simulate_cli(capsys, config_path, str(path), *args)
    assert code == 0
    first = out.splitlines()[2]
    assert first.endswith(header)
    assert ("route" in first) == ("--policy" not in args)
    assert ("no curator changed anything" not in out) == changed


def test_a_rejecting_policy_reports_the_400(
    tmp_path: Path, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The newest message alone is over the 300-token budget, and the policy says reject.
    body = {"model": "small-agent", "messages": [system(), user(long_text(300))]}
    path = write(tmp_path, "request.json", body)
    code, out, _ = simulate_cli(capsys, config_path, str(path), "--policy", "strict")
    assert code == 0
    assert "  REJECTED: 400 context_length_exceeded: This request needs " in out
    assert "total: 1 request(s), 1 rejected, 0 skipped" in out
    code, out, _ = simulate_cli(capsys, config_path, str(path), "--policy", "strict", "--json")
    (request,) = json.loads(out)["requests"]
    assert request["rejected"].startswith("400 context_length_exceeded")
    assert request["tokens_after"] is None
    assert request["cost"]["curated"] == request["cost"]["original"]


def test_cached_price_is_a_parameter(
    tmp_path: Path, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = [system(long_text(600, "rule")), user("Start.")]
    path = write(tmp_path, "c.jsonl", {"messages": base}, {"messages": [*base, user("More.")]})
    code, out, _ = simulate_cli(capsys, config_path, str(path), "--json", "--cached-price", "0.5")
    assert code == 0
    data = json.loads(out)
    assert data["pricing"]["cached_price"] == 0.5
    second = data["requests"][1]["cost"]["original"]
    expected = second["input_tokens"] - second["cached_tokens"] / 2
    assert second["cached_tokens"] > 0
    assert second["cost"] == pytest.approx(expected)
    with pytest.raises(SystemExit) as info:
        main(["simulate", "--config", str(config_path), str(path), "--cached-price", "1.5"])
    assert info.value.code == 2
    assert "expected a number from 0 to 1, got 1.5" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"messages": []}\n{"messages": []}\n{"messages": [\n', ":3: invalid JSON (column 15)"),
        ('{"messages": []}\n{"model": "x", "prompt": "hi"}\n', ":2: expected a chat request"),
        ('{"messages": []}\n[1, 2]\n', ":2: expected a chat request or an audit record"),
        (
            '{"messages": [{"role": "user"}, "hi"]}',
            ': messages[1]: expected an object with a "role"',
        ),
        ('{\n  "model": "x",\n  "messages": [\n    {"role": "user",}\n  ]\n}', ":4: invalid JSON"),
        ('"hello"', ": expected a chat request or an audit record (a JSON object), got a string"),
        ("\n  \n", ": empty input"),
        ('{"kind": "summarizer", "original": []}\n', ": no chat requests"),
    ],
)
def test_bad_input_names_the_line_and_exits_1(
    tmp_path: Path,
    config_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    problem: str,
) -> None:
    path = tmp_path / "input.jsonl"
    path.write_text(content)
    code, out, err = simulate_cli(capsys, config_path, str(path))
    # Read as it goes: the requests before a bad line were shown, no totals.
    assert code == 1
    assert "total:" not in out
    assert err.startswith(f"curator simulate: {path}{problem}")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (("--route", "agnets"), "unknown route 'agnets' (routes: agents, default)"),
        (("--policy", "nope"), "unknown policy 'nope' (policies: agents, strict, summarizing"),
        (("--policy", "preset:nope"), "unknown preset 'nope'"),
    ],
)
def test_unknown_route_or_policy_exits_1(
    tmp_path: Path,
    config_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    problem: str,
) -> None:
    path = write(tmp_path, "request.json", conversation())
    code, out, err = simulate_cli(capsys, config_path, str(path), *args)
    assert (code, out) == (1, "")
    assert err.startswith("curator simulate: ")
    assert problem in err


def test_a_missing_input_file_exits_1(
    tmp_path: Path, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = simulate_cli(capsys, config_path, str(tmp_path / "nope.jsonl"))
    assert code == 1
    missing = tmp_path / "nope.jsonl"
    assert err == f"curator simulate: cannot read {missing}: No such file or directory\n"


def summarizing_input(tmp_path: Path) -> Path:
    return write(tmp_path, "request.json", conversation(results=3))


def test_the_summarizer_gets_a_labelled_placeholder_without_allow_calls(
    tmp_path: Path, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = summarizing_input(tmp_path)
    code, out, _ = simulate_cli(capsys, config_path, str(path), "--policy", "summarizing", "--diff")
    assert code == 0
    assert "  summarizer summarize [" in out
    assert "  summarizer: the summary is a PLACEHOLDER, no model was called\n" in out
    assert any(line.startswith("+") and simulate.PLACEHOLDER in line for line in out.splitlines())
    code, out, _ = simulate_cli(capsys, config_path, str(path), "--policy", "summarizing", "--json")
    data = json.loads(out)
    assert data["summaries_are_placeholders"] is True
    (request,) = data["requests"]
    assert request["summarizer"]["calls"] == 1
    # The placeholder is as long as a summary may be, so the numbers are the worst case.
    kept = tokens([system("You are a coding agent."), user("What now?")])
    assert 200 <= request["tokens_after"] - kept <= 240


def test_allow_calls_asks_the_summarizers_upstream(tmp_path: Path, config: Config) -> None:
    seen: list[httpx.Request] = []

    def upstream(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = {"message": {"role": "assistant", "content": "Read three files; all fine."}}
        usage = {"prompt_tokens": 321, "completion_tokens": 7}
        return httpx.Response(200, json={"choices": [answer], "usage": usage})

    options = Options(
        input=str(summarizing_input(tmp_path)),
        policy="summarizing",
        allow_calls=True,
        json=True,
        diff=True,
    )
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdout", out)
        code = simulate.run(config, options, transport=httpx.MockTransport(upstream))
    assert code == 0
    (call,) = seen
    assert str(call.url) == "https://upstream.test/v1/chat/completions"
    assert call.headers["authorization"] == "Bearer sk-test"
    assert json.loads(call.content)["model"] == "small-summarizer"
    data = json.loads(out.getvalue())
    assert data["summaries_are_placeholders"] is False
    (request,) = data["requests"]
    assert (request["summarizer"]["calls"], request["summarizer"]["prompt_tokens"]) == (1, 321)
    assert [a["kind"] for a in request["actions"]] == ["summarize"]
    assert "\n+  Read three files; all fine.\n" in request["diff"]
    assert simulate.PLACEHOLDER not in request["diff"]
    assert request["tokens_after"] < request["tokens_before"]


@dataclass(frozen=True, slots=True)
class Broken:
    """A curator with a bug."""

    name: ClassVar[str] = "broken"

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        raise RuntimeError(f"boom on {len(messages)} messages for {ctx.model}")


def test_requests_the_proxy_would_not_curate_are_shown_as_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.replace('"off": {curators: []}', '"off": {curators: [broken]}'))
    config = load_config(path, registry={**CURATORS, "broken": Broken})
    empty = {"model": "other", "messages": []}
    source = write(tmp_path, "c.jsonl", conversation(model="other"), empty)
    assert simulate.run(config, Options(input=str(source))) == 0
    out = capsys.readouterr().out
    assert (
        "  SKIPPED: curator_error (RuntimeError: boom on 9 messages for other); "
        "the proxy forwards it unchanged\n"
    ) in out
    assert "  SKIPPED: no_messages; the proxy forwards it unchanged\n" in out
    assert "total: 2 request(s), 0 rejected, 2 skipped\n" in out
    assert simulate.run(config, Options(input=str(source), json=True)) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["skipped"] for r in data["requests"]] == [
        "curator_error (RuntimeError: boom on 9 messages for other)",
        "no_messages",
    ]
    assert data["total"]["curated"] == data["total"]["original"]


def test_a_failed_summarizer_call_is_reported_and_curation_goes_on(
    tmp_path: Path, config: Config, capsys: pytest.CaptureFixture[str]
) -> None:
    def upstream(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"error": {"message": "overloaded"}})

    source = summarizing_input(tmp_path)
    options = Options(input=str(source), policy="summarizing", allow_calls=True)
    assert simulate.run(config, options, transport=httpx.MockTransport(upstream)) == 0
    out = capsys.readouterr().out
    assert (
        "  summarizer failed: summarizer via main/small-summarizer: SummaryCallError: "
        "upstream 'main' answered HTTP 503: overloaded\n"
    ) in out
    assert "  no curator changed anything\n" in out
    assert "PLACEHOLDER" not in out


def test_audit_export_lines_are_read_as_they_are_written(
    tmp_path: Path, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = conversation()
    builder = RecordBuilder(Redactor.build())
    entries = [
        audited(id="a1", time=1.0, model="small-agent", original=body["messages"]),
        audited(id="a2", time=2.0, kind="summarizer", parent_id="a1", model="small-x"),
        audited(id="a3", time=3.0, model="other", original=body["messages"]),
    ]
    path = tmp_path / "export.jsonl"
    path.write_bytes(b"".join(builder.build(e).to_json() + b"\n" for e in entries))
    code, out, _ = simulate_cli(capsys, config_path, str(path), "--json")
    assert code == 0
    requests = json.loads(out)["requests"]
    assert [(r["line"], r["route"]) for r in requests] == [(1, "agents"), (3, "default")]
    assert len(requests[0]["actions"]) == 2


def test_a_request_no_route_takes_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.replace('  - {name: default, upstream: main, policy: "off"}\n', ""))
    source = write(tmp_path, "c.jsonl", conversation(), conversation(model="gpt-4o"))
    code, out, err = simulate_cli(capsys, path, str(source))
    assert code == 1
    assert "request 1 (line 1)" in out
    assert "total:" not in out
    assert err == (
        "curator simulate: no route matches POST /v1/chat/completions with model 'gpt-4o' "
        "and no headers; pass --route or --policy\n"
    )
