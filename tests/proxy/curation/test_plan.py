"""chat.py through the app: exact bytes when unchanged, only `messages` replaced when changed,
fail-open skips, overflow rejection, policy header, and curation off the event loop."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx
import orjson
import pytest
from starlette.testclient import TestClient

from policies.base import Action, AsyncOnlyError, CurationContext, CuratorOutput
from policies.chain import Chain
from policies.encoders import Encoder
from policies.errors import ContextOverflow
from policies.messages import SUMMARY_PREFIX, Message
from policies.policy import Policy
from policies.summary_io import SummaryRequest
from policies.tokens import TokenCounter
from proxy.config.loader import Config, Route, ServerConfig, UpstreamConfig
from proxy.curation.plan import OFFLOAD_BYTES, CurationSetup, plan
from proxy.curation.thread import CurationThread
from proxy.observability.exchange import ExchangeRecord
from proxy.protocols.chat import CHAT as CHAT_API
from proxy.serving.app import create_app
from proxy.serving.headers import actions_header

CHAT = "/v1/chat/completions"


@dataclass(frozen=True, slots=True)
class CutTools:
    """Test curator: cuts tool results longer than `max_chars`."""

    name: ClassVar[str] = "cut_tools"
    max_chars: int = 10

    def curate(
        self,
        messages: Sequence[Message],
        ctx: CurationContext,  # noqa: ARG002 - the Curator protocol's signature
    ) -> CuratorOutput:
        out: list[Message] = []
        cut: list[int] = []
        for i, msg in enumerate(messages):
            content = msg.get("content")
            if (
                msg.get("role") == "tool"
                and isinstance(content, str)
                and len(content) > self.max_chars
            ):
                out.append({**msg, "content": content[: self.max_chars]})
                cut.append(i)
            else:
                out.append(msg)
        actions = (Action(self.name, "truncate", tuple(cut), 0, "too long"),) if cut else ()
        return CuratorOutput(out, actions)


@dataclass(frozen=True, slots=True)
class Explode:
    """Test curator with a bug."""

    name: ClassVar[str] = "explode"

    def curate(
        self,
        messages: Sequence[Message],  # noqa: ARG002 - the Curator protocol's signature
        ctx: CurationContext,  # noqa: ARG002
    ) -> CuratorOutput:
        raise RuntimeError("curator bug")


@dataclass(frozen=True, slots=True)
class Overflow:
    """Test curator standing in for `on_overflow: reject`."""

    name: ClassVar[str] = "overflow"

    def curate(
        self,
        messages: Sequence[Message],  # noqa: ARG002 - the Curator protocol's signature
        ctx: CurationContext,  # noqa: ARG002
    ) -> CuratorOutput:
        raise ContextOverflow(9000, 8000)


@dataclass(frozen=True, slots=True)
class ThreadSpy:
    """Records which thread curation ran in."""

    name: ClassVar[str] = "thread_spy"
    seen: list[int] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def curate(
        self,
        messages: Sequence[Message],
        ctx: CurationContext,  # noqa: ARG002 - the Curator protocol's signature
    ) -> CuratorOutput:
        self.seen.append(threading.get_ident())
        self.names.append(threading.current_thread().name)
        return CuratorOutput(list(messages))


@dataclass(frozen=True, slots=True)
class AskModel:
    """Async test curator: replaces the middle of the history with the model's summary."""

    name: ClassVar[str] = "ask_model"

    def curate(
        self,
        messages: Sequence[Message],  # noqa: ARG002 - the Curator protocol's signature
        ctx: CurationContext,  # noqa: ARG002
    ) -> CuratorOutput:
        raise AsyncOnlyError([self.name])

    async def acurate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        assert ctx.services is not None
        request = SummaryRequest("main", "gpt-4o-mini", 200, 5.0)
        done = await ctx.services.complete([{"role": "user", "content": "Summarize."}], request)
        ctx.services.stats.calls += 1
        summary = {"role": "user", "content": f"{SUMMARY_PREFIX}]: {done.text}"}
        middle = tuple(range(1, len(messages) - 1))
        action = Action(self.name, "summarize", middle, 0, "summarized")
        return CuratorOutput([messages[0], summary, messages[-1]], (action,))


def policy(name: str, *curators: object) -> Policy:
    return Policy(name, chain=Chain(tuple(curators)))  # type: ignore[arg-type]


def make_config(policies: dict[str, Policy], *, allow_header: bool = False) -> Config:
    first = next(iter(policies))
    return Config(
        source="<test>",
        server=ServerConfig(),
        upstreams={"main": UpstreamConfig("main", "http://upstream.test/v1")},
        policies=policies,
        routes=(Route("agents", "main", first, allow_policy_header=allow_header),),
    )


class Harness:
    """The app over a MockTransport that records what the upstream received."""

    def __init__(self, config: Config) -> None:
        self.sent: list[httpx.Request] = []
        self.records: list[ExchangeRecord] = []
        self.loop_threads: list[int] = []
        transport = httpx.MockTransport(self._answer)
        app = create_app(config, transport, observers=(self._observe,))
        self.client = TestClient(app)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        message = {"role": "assistant", "content": "They read two files."}
        return httpx.Response(200, json={"id": "chatcmpl-1", "choices": [{"message": message}]})

    def _observe(self, record: ExchangeRecord) -> None:
        self.records.append(record)
        self.loop_threads.append(threading.get_ident())

    def post(self, body: bytes, headers: dict[str, str] | None = None) -> Any:
        # Any: starlette's TestClient answers with httpx2 or httpx responses.
        with self.client as client:
            return client.post(CHAT, content=body, headers=headers or {})


TOOL_CHAT: dict[str, Any] = {
    "model": "gpt-4o",
    "x_vendor_first": {"keep": [1, 2.5, None]},
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Read both files."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "read", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "alpha " * 40},
        {"role": "tool", "tool_call_id": "b", "content": "beta " * 40},
        {"role": "user", "content": "Summarize."},
    ],
    "temperature": 0.2,
    "stream": False,
    "x_vendor_last": "é",
}


def test_unchanged_requests_reach_the_upstream_byte_for_byte() -> None:
    body = (
        b'{ "messages" : [ {"role":"user",  "content":"caf\\u00e9 \\ud83d\\ude00"} ],'
        b'\n  "model":"gpt-4o", "zeta": 1e3, "alpha" :[ ] }'
    )
    harness = Harness(make_config({"cut": policy("cut", CutTools())}))
    response = harness.post(body)
    assert harness.sent[0].content == body
    assert response.headers["x-curator-route"] == "agents"
    assert response.headers["x-curator-policy"] == "cut"
    assert response.headers["x-curator-tokens-before"] == response.headers["x-curator-tokens-after"]
    assert "x-curator-actions" not in response.headers
    assert "x-curator-skipped" not in response.headers


def test_changed_requests_replace_only_messages_keeping_key_order() -> None:
    harness = Harness(make_config({"cut": policy("cut", CutTools(max_chars=10))}))
    response = harness.post(orjson.dumps(TOOL_CHAT))
    sent = harness.sent[0]
    forwarded = orjson.loads(sent.content)
    assert list(forwarded) == list(TOOL_CHAT)
    assert {k: v for k, v in forwarded.items() if k != "messages"} == {
        k: v for k, v in TOOL_CHAT.items() if k != "messages"
    }
    assert [m.get("content") for m in forwarded["messages"][3:5]] == ["alpha alph", "beta beta "]
    assert forwarded["messages"][:3] == TOOL_CHAT["messages"][:3]
    assert int(sent.headers["content-length"]) == len(sent.content)
    assert response.headers["x-curator-actions"] == "cut_tools=2"
    assert int(response.headers["x-curator-tokens-after"]) < int(
        response.headers["x-curator-tokens-before"]
    )


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"model": "gpt-4o", "messages": [', "invalid_json"),
        (b"\xff\xfe not utf-8", "invalid_json"),
        (b'["model", "messages"]', "not_an_object"),
        (b'{"model": "gpt-4o"}', "no_messages"),
        (b'{"model": "gpt-4o", "messages": []}', "no_messages"),
        (b'{"model": "gpt-4o", "messages": {"role": "user"}}', "no_messages"),
        (b'{"model": "gpt-4o", "messages": ["hello"]}', "bad_messages"),
        (b'{"model": "gpt-4o", "messages": [{"content": "no role"}]}', "bad_messages"),
        (b'{"model": "gpt-4o", "messages": [{"role": 7, "content": "x"}]}', "bad_messages"),
    ],
)
def test_unreadable_bodies_are_forwarded_unchanged_and_flagged(body: bytes, reason: str) -> None:
    harness = Harness(make_config({"cut": policy("cut", CutTools())}))
    response = harness.post(body)
    assert response.status_code == 200
    assert harness.sent[0].content == body
    assert response.headers["x-curator-skipped"] == reason
    assert response.headers["x-curator-route"] == "agents"
    assert harness.records[0].skip_reason == reason


def test_a_failing_curator_fails_open_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    body = orjson.dumps(TOOL_CHAT)
    harness = Harness(make_config({"boom": policy("boom", CutTools(), Explode())}))
    with caplog.at_level(logging.ERROR):
        response = harness.post(body)
    assert response.status_code == 200
    assert harness.sent[0].content == body
    assert response.headers["x-curator-skipped"] == "curator_error"
    logged = [r for r in caplog.records if r.name == "curator.chat"]
    assert len(logged) == 1
    assert logged[0].exc_info is not None


def test_overflow_with_reject_answers_400_context_length_exceeded() -> None:
    harness = Harness(make_config({"strict": policy("strict", Overflow())}))
    response = harness.post(orjson.dumps(TOOL_CHAT))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["type"] == "invalid_request_error"
    assert error["param"] == "messages"
    assert "9000" in error["message"]
    assert harness.sent == []
    assert harness.records[0].outcome == "proxy_error"


@pytest.mark.parametrize(
    ("allow", "asked", "policy_used", "ignored"),
    [
        (True, "cut", "cut", None),
        (True, "nope", "off", "unknown"),
        (False, "cut", "off", "not_allowed"),
    ],
)
def test_policy_header(allow: bool, asked: str, policy_used: str, ignored: str | None) -> None:
    policies = {"off": policy("off"), "cut": policy("cut", CutTools(max_chars=10))}
    harness = Harness(make_config(policies, allow_header=allow))
    response = harness.post(orjson.dumps(TOOL_CHAT), {"x-curator-policy": asked})
    assert response.headers["x-curator-policy"] == policy_used
    assert response.headers.get("x-curator-policy-ignored") == ignored
    assert "x-curator-policy" not in harness.sent[0].headers
    changed = harness.sent[0].content != orjson.dumps(TOOL_CHAT)
    assert changed == (policy_used == "cut")


@pytest.mark.parametrize(("size", "on_loop"), [("small", True), ("big", False)])
def test_big_bodies_are_always_curated_in_the_curation_thread(size: str, on_loop: bool) -> None:
    """Even alone: a small turn arriving meanwhile must not wait behind a big body."""
    spy = ThreadSpy()
    config = make_config({"spy": policy("spy", spy)})
    counter = TokenCounter(config.models)
    counter.encoder("gpt-4o")
    offload = CurationThread()
    setup = CurationSetup(config, counter, {counter.encoding_name("gpt-4o")}, offload)
    text = "hi" if size == "small" else "x " * OFFLOAD_BYTES
    body = orjson.dumps({**TOOL_CHAT, "messages": [{"role": "user", "content": text}]})

    async def planned() -> int:
        await plan(CHAT_API, body, {}, setup, ExchangeRecord("r", 0.0, "POST", CHAT))
        return threading.get_ident()

    loop_thread = asyncio.run(planned())
    offload.close()
    assert (spy.seen == [loop_thread]) == on_loop
    assert (spy.names == ["curator-curate_0"]) == (not on_loop)


def test_chat_records_carry_curation_details() -> None:
    harness = Harness(make_config({"cut": policy("cut", CutTools(max_chars=10))}))
    harness.post(orjson.dumps(TOOL_CHAT))
    (record,) = harness.records
    assert record.model == "gpt-4o"
    assert (record.route, record.policy, record.upstream) == ("agents", "cut", "main")
    assert record.original == TOOL_CHAT["messages"]
    assert record.curated is not None
    assert record.curated[3]["content"] == "alpha alph"
    assert [a.curator for a in record.actions] == ["cut_tools"]
    assert record.tokens_before is not None
    assert record.tokens_after is not None
    assert record.tokens_after < record.tokens_before
    # What curation counted, for the spend: keys and tokens of each original message.
    counter = TokenCounter()
    assert list(record.counts) == counter.count_each(record.original, "gpt-4o")
    assert list(record.keys) == counter.measure(record.original, "gpt-4o")[0]
    assert record.curation_s is not None
    assert record.body is not None
    assert record.body["x_vendor_last"] == "é"


def test_actions_header_counts_distinct_messages_per_curator_in_order() -> None:
    actions = [
        Action("tool_result_truncation", "truncate", (3, 5), 10, "long"),
        Action("token_budget", "drop", (1, 2), 20, "budget"),
        Action("tool_result_truncation", "truncate", (5, 7), 10, "long"),
    ]
    assert actions_header(actions) == "tool_result_truncation=3,token_budget=2"
    assert actions_header([]) == ""


def test_async_chains_call_the_model_through_the_upstream_client() -> None:
    harness = Harness(make_config({"summary": policy("summary", AskModel())}))
    response = harness.post(orjson.dumps(TOOL_CHAT), {"authorization": "Bearer sk-client"})
    summary_call, forwarded = harness.sent
    assert str(summary_call.url) == "http://upstream.test/v1/chat/completions"
    assert orjson.loads(summary_call.content)["model"] == "gpt-4o-mini"
    messages = orjson.loads(forwarded.content)["messages"]
    assert messages[1]["content"] == f"{SUMMARY_PREFIX}]: They read two files."
    assert [messages[0], messages[-1]] == [TOOL_CHAT["messages"][0], TOOL_CHAT["messages"][-1]]
    assert response.headers["x-curator-actions"] == "ask_model=4"
    (record,) = harness.records
    assert record.summary is not None
    assert record.summary.calls == 1


def test_a_tokenizer_not_loaded_yet_is_loaded_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[tuple[str, int]] = []

    class SpyCounter(TokenCounter):
        """Notes which thread waits for each tokenizer load."""

        def _load(self, name: str) -> Encoder:
            waits.append((name, threading.get_ident()))
            return super()._load(name)

    monkeypatch.setattr("proxy.serving.edge.TokenCounter", SpyCounter)
    harness = Harness(make_config({"cut": policy("cut", CutTools())}))
    body = {**TOOL_CHAT, "model": "gpt-4"}  # cl100k_base: not preloaded
    response = harness.post(orjson.dumps(body))
    assert response.status_code == 200
    assert [name for name, _ in waits] == ["o200k_base", "cl100k_base"]
    assert all(thread != harness.loop_threads[0] for _, thread in waits)


@pytest.mark.parametrize(
    ("curators", "assumed"), [((), None), ((CutTools(max_chars=10),), "assumed")]
)
def test_only_a_budget_can_assume_a_window(
    curators: tuple[object, ...], assumed: str | None
) -> None:
    """A policy without curators makes no budget, so nobody-knows-this-model is no news
    there: no `x-curator-window: assumed`, and nothing counted (the check costs per request)."""
    harness = Harness(make_config({"p": policy("p", *curators)}))
    body = orjson.dumps({**TOOL_CHAT, "model": "nobody-knows-me"})
    response = harness.post(body)
    assert response.status_code == 200
    assert response.headers.get("x-curator-window") == assumed


def test_the_budgets_tool_count_is_on_the_record_in_chat_form_whatever_the_protocol() -> None:
    """What the calibration adds to the curated messages (`UpstreamFacts.learn`): a
    Responses request's flat tools are counted as the chat tools they stand for."""
    function = {"name": "read_file", "description": "Read a file", "parameters": {}}
    harness = Harness(make_config({"cut": policy("cut", CutTools(max_chars=10))}))
    user = [{"role": "user", "content": "hi"}]
    body = {"model": "gpt-4o", "input": user, "tools": [{"type": "function", **function}]}
    with harness.client as client:
        client.post("/v1/responses", content=orjson.dumps(body))
    (record,) = harness.records
    counter = TokenCounter()
    chat_form = counter.count_tools([{"type": "function", "function": function}], "gpt-4o")
    assert record.tools_tokens == chat_form
    assert chat_form > counter.count_tools(body["tools"], "gpt-4o")  # as the wire says it
