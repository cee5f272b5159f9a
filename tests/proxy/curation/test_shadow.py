"""Route modes: shadow curates and reports but forwards the client's bytes; off only routes."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import httpx
import orjson
import pytest
from starlette.testclient import TestClient

from policies.base import CurationContext, CuratorOutput
from policies.budget import TokenBudget
from policies.chain import Chain
from policies.errors import ConfigError
from policies.messages import Message
from policies.policy import Policy
from policies.summarizer import Summarizer
from policies.summary_io import Completion, Services, SummaryRequest
from policies.tool_results import ToolResultTruncation
from proxy.config.loader import (
    Config,
    Mode,
    Route,
    RouteMatch,
    ServerConfig,
    UpstreamConfig,
    load_config,
)
from proxy.config.render import format_config
from proxy.curation.plan import CurationSetup, plan
from proxy.observability.exchange import ExchangeRecord
from proxy.protocols.chat import CHAT as CHAT_API
from proxy.serving.app import create_app
from tests import factories as f

CHAT = "/v1/chat/completions"
BASE = "https://upstream.test/v1"


@dataclass(frozen=True, slots=True)
class Exploding:
    """A curator that must never run."""

    name: ClassVar[str] = "exploding"

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        raise AssertionError(f"ran on {len(messages)} messages for {ctx.model}: mode is off")


def truncating() -> Policy:
    return Policy("trim", Chain((ToolResultTruncation(max_tokens=40, keep_recent=0),)))


def config(mode: Mode, policy: Policy | None = None) -> Config:
    chosen = policy or truncating()
    return Config(
        source="<test>",
        server=ServerConfig(),
        upstreams={"main": UpstreamConfig("main", BASE)},
        policies={chosen.name: chosen, "rejecting": Policy("rejecting", on_overflow="reject")},
        routes=(
            Route("strict", "main", "rejecting", RouteMatch(model="tiny-*"), mode=mode),
            Route("default", "main", chosen.name, mode=mode),
        ),
    )


def long_history(model: str = "gpt-4o") -> bytes:
    """An agent history whose old tool result truncation would cut; keys in odd order."""
    messages = [
        *f.log_read(),
        f.assistant("The log is long."),
        f.user("Summarize it."),
    ]
    body = {"stream": False, "messages": messages, "model": model, "x-vendor": {"keep": 1}}
    # Spacing the proxy would never produce, so "exact bytes" cannot pass by accident.
    return orjson.dumps(body).replace(b'","', b'" , "')


class Upstream:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.transport = httpx.MockTransport(self._handle)

    def _handle(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(request.content)
        return httpx.Response(200, json={"ok": True})


@pytest.fixture
def upstream() -> Upstream:
    return Upstream()


def client(upstream: Upstream, cfg: Config, records: list[ExchangeRecord]) -> TestClient:
    app = create_app(cfg, upstream.transport, observers=(records.append,))
    return TestClient(app)


@pytest.fixture
def records() -> list[ExchangeRecord]:
    return []


def test_shadow_forwards_the_exact_bytes_and_reports_what_enforce_would_do(
    upstream: Upstream, records: list[ExchangeRecord]
) -> None:
    raw = long_history()
    with client(upstream, config("enforce"), records) as c:
        enforced = c.post(CHAT, content=raw)
    with client(upstream, config("shadow"), records) as c:
        shadowed = c.post(CHAT, content=raw)
    enforced_body, shadow_body = upstream.bodies
    assert enforced_body != raw  # enforce changes this request...
    assert shadow_body == raw  # ...shadow sends it untouched
    assert shadowed.headers["x-curator-mode"] == "shadow"
    assert "x-curator-mode" not in enforced.headers
    for name in ("x-curator-tokens-before", "x-curator-tokens-after", "x-curator-actions"):
        assert shadowed.headers[name] == enforced.headers[name]
    assert int(shadowed.headers["x-curator-tokens-after"]) < int(
        shadowed.headers["x-curator-tokens-before"]
    )
    assert shadowed.headers["x-curator-actions"] == "tool_result_truncation=1"
    assert "x-curator-skipped" not in shadowed.headers


def test_a_shadow_record_holds_the_would_be_curation(
    upstream: Upstream, records: list[ExchangeRecord]
) -> None:
    with client(upstream, config("shadow"), records) as c:
        c.post(CHAT, content=long_history())
    (record,) = records
    assert record.mode == "shadow"
    assert record.skip_reason is None
    assert record.original is not None
    assert record.curated is not None
    assert record.curated is not record.original
    assert len(record.curated[3]["content"]) < len(record.original[3]["content"])
    assert [a.curator for a in record.actions] == ["tool_result_truncation"]
    assert record.tokens_after is not None
    assert record.tokens_before is not None
    assert record.tokens_after < record.tokens_before


def test_shadow_never_rejects_it_says_it_would_have(
    upstream: Upstream, records: list[ExchangeRecord]
) -> None:
    # A window smaller than the pins + last message: enforce answers 400.
    raw = long_history("tiny-model")
    small = Policy("rejecting", Chain((TokenBudget(),)), context_window=50, on_overflow="reject")
    enforce = config("enforce")
    enforce = replace(enforce, policies={**enforce.policies, "rejecting": small})
    with client(upstream, enforce, records) as c:
        assert c.post(CHAT, content=raw).json()["error"]["code"] == "context_length_exceeded"
    shadow = replace(enforce, routes=tuple(replace(r, mode="shadow") for r in enforce.routes))
    with client(upstream, shadow, records) as c:
        response = c.post(CHAT, content=raw)
    assert response.status_code == 200
    assert upstream.bodies == [raw]
    assert response.headers["x-curator-skipped"] == "would_reject"
    assert response.headers["x-curator-mode"] == "shadow"
    assert records[-1].skip_reason == "would_reject"


def test_shadow_keeps_fail_open_reasons(upstream: Upstream, records: list[ExchangeRecord]) -> None:
    with client(upstream, config("shadow"), records) as c:
        response = c.post(CHAT, content=b"{not json")
    assert upstream.bodies == [b"{not json"]
    assert response.headers["x-curator-skipped"] == "invalid_json"
    assert response.headers["x-curator-mode"] == "shadow"


def test_off_routes_forward_exact_bytes_without_curating_or_counting(
    upstream: Upstream, records: list[ExchangeRecord]
) -> None:
    policy = Policy("explodes", Chain((Exploding(),)))
    raw = long_history()
    with client(upstream, config("off", policy), records) as c:
        response = c.post(CHAT, content=raw)
        counter = c.app_state["edge"].current.curation.counter
        assert counter.cache_size == 0  # the long tool result was never tokenized
    assert upstream.bodies == [raw]
    assert response.headers["x-curator-mode"] == "off"
    assert response.headers["x-curator-route"] == "default"
    curation = [h for h in response.headers if h.startswith("x-curator-")]
    assert sorted(curation) == ["x-curator-mode", "x-curator-request-id", "x-curator-route"]
    (record,) = records
    assert (record.mode, record.route, record.policy, record.skip_reason) == (
        "off",
        "default",
        None,
        None,
    )
    assert (record.tokens_before, record.curated, record.actions) == (None, None, ())


def test_off_routes_take_even_unreadable_bodies_without_a_skip_reason(
    upstream: Upstream, records: list[ExchangeRecord]
) -> None:
    with client(upstream, config("off"), records) as c:
        response = c.post(CHAT, content=b"[1, 2]")
    assert upstream.bodies == [b"[1, 2]"]
    assert "x-curator-skipped" not in response.headers
    assert records[0].skip_reason is None


@pytest.mark.anyio
async def test_shadow_runs_an_async_chain_and_still_sends_the_original() -> None:
    calls: list[SummaryRequest] = []

    async def complete(_prompt: list[Message], request: SummaryRequest) -> Completion:
        calls.append(request)
        return Completion("They read a long log.")

    summarizer = Summarizer(
        upstream="main", model="small", trigger_tokens=200, max_summary_tokens=64
    )
    cfg = config("shadow", Policy("summing", Chain((summarizer,))))
    raw = long_history()
    setup = CurationSetup(cfg, f.counter())
    record = ExchangeRecord("r", 0.0, "POST", CHAT)
    planned = await plan(
        CHAT_API, raw, {}, setup, record, lambda _route: Services(complete=complete)
    )
    assert len(calls) == 1
    assert planned.body is raw
    assert record.mode == "shadow"
    assert record.curated is not None
    assert any("They read a long log." in str(m) for m in record.curated)
    assert dict(planned.headers)[b"x-curator-mode"] == b"shadow"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- config ------------------------------------------------------------------------------
ROUTES = """\
upstreams:
  main: {base_url: "https://upstream.test/v1"}
policies:
  chat: preset:chat
routes:
  - name: trial
    match: {model: "gpt-5*"}
    upstream: main
    policy: chat
    mode: shadow
  - name: legacy
    match: {model: "davinci*"}
    upstream: main
    policy: chat
    mode: %s
  - name: default
    upstream: main
    policy: chat
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_routes_parse_their_mode_with_enforce_as_default(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, ROUTES % "off"))
    assert [r.mode for r in cfg.routes] == ["shadow", "off", "enforce"]


def test_an_unknown_mode_names_its_line_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, ROUTES % "dry-run")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    (problem,) = caught.value.problems
    assert str(problem) == (
        f"{path}:15: routes[1].mode: expected enforce | shadow | off, got a string 'dry-run'"
    )


def test_check_shows_each_routes_mode(tmp_path: Path) -> None:
    text = format_config(load_config(write(tmp_path, ROUTES % "off")))
    assert "     mode: shadow (curated and reported only: the upstream gets the client's" in text
    assert "     mode: off (no curation, no token counting" in text
    assert "     mode: enforce\n" in text
