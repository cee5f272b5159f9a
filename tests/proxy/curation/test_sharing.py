"""Requests in flight share one copy of an identical tools list (`proxy.curation.sharing`):
only equal JSON bytes are shared, what goes upstream is unchanged, and a list lives no
longer than the requests that hold it."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import orjson
from hypothesis import given
from hypothesis import strategies as st

from policies.chain import Chain
from policies.policy import Policy
from policies.tokens import TokenCounter
from policies.tool_results import ToolResultTruncation
from proxy.config.loader import Config, Route, ServerConfig, UpstreamConfig
from proxy.curation.plan import CurationSetup, Plan, plan
from proxy.curation.sharing import SharedTools
from proxy.observability.exchange import ExchangeRecord
from proxy.protocols.base import WireProtocol
from proxy.protocols.chat import CHAT
from proxy.protocols.responses.protocol import RESPONSES
from tests import factories as f

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    },
    {"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}},
]


def chat_body(tools: list[Any], content: str = "hi", key: str = "tools") -> bytes:
    """A chat request whose tool result is long enough for the test policy to cut (and not in
    the newest turn, which is never cut)."""
    result = f.tool_result("c1", "x" * 4000)
    messages = [f.user(content), f.assistant_calls("c1"), result, f.assistant("Read it.")]
    return orjson.dumps({"model": "gpt-4o", key: tools, "messages": messages})


def setup() -> CurationSetup:
    curated = Policy("cut", chain=Chain((ToolResultTruncation(max_tokens=20, keep_recent=0),)))
    config = Config(
        source="<test>",
        server=ServerConfig(),
        upstreams={"main": UpstreamConfig("main", "http://upstream.test/v1")},
        policies={"cut": curated},
        routes=(Route("agents", "main", "cut"),),
    )
    counter = TokenCounter(config.models)
    counter.encoder("gpt-4o")
    return CurationSetup(config, counter, {counter.encoding_name("gpt-4o")})


def planned(
    curation: CurationSetup, raw: bytes, protocol: WireProtocol = CHAT
) -> tuple[Plan, ExchangeRecord]:
    record = ExchangeRecord("r", 0.0, "POST", protocol.path)
    return asyncio.run(plan(protocol, raw, {}, curation, record)), record


def test_requests_in_flight_with_equal_tools_hold_one_list() -> None:
    curation = setup()
    first_raw, second_raw = chat_body(TOOLS, "one"), chat_body(TOOLS, "two")
    first, first_record = planned(curation, first_raw)
    second, second_record = planned(curation, second_raw)
    assert first_record.body is not None
    assert second_record.body is not None
    assert second_record.body["tools"] is first_record.body["tools"]
    assert second_record.facts["tools"] is first_record.body["tools"]
    assert len(curation.tools) == 1
    # Curated, each body goes upstream as it would have without sharing.
    for sent, raw in ((first, first_raw), (second, second_raw)):
        assert sent.body != raw
        expected = orjson.loads(raw)
        expected["messages"] = orjson.loads(sent.body)["messages"]
        assert sent.body == orjson.dumps(expected)


def test_only_the_same_json_bytes_are_shared() -> None:
    curation = setup()
    reordered = [{**dict(reversed(TOOLS[0].items()))}, TOOLS[1]]
    lists = [TOOLS, reordered, [*TOOLS, TOOLS[1]], TOOLS[:1]]
    records = [planned(curation, chat_body(tools, str(i)))[1] for i, tools in enumerate(lists)]
    held = [record.body["tools"] for record in records if record.body is not None]
    assert len({id(tools) for tools in held}) == len(lists)
    # Key order is kept: a reordered list is not swapped for an equal dict's order.
    assert [orjson.dumps(tools) for tools in held] == [orjson.dumps(t) for t in lists]


def test_a_passthrough_body_goes_upstream_as_its_exact_bytes() -> None:
    curation = setup()
    raw = chat_body(TOOLS, "short")
    short = orjson.loads(raw)
    short["messages"] = short["messages"][:1]
    raw = orjson.dumps(short, option=orjson.OPT_INDENT_2)  # nothing to cut
    planned(curation, chat_body(TOOLS))
    sent, record = planned(curation, raw)
    assert sent.body == raw
    assert record.body is not None
    assert len(curation.tools) == 1


def test_legacy_functions_are_shared_too() -> None:
    curation = setup()
    functions = [tool["function"] for tool in TOOLS]
    records = [planned(curation, chat_body(functions, str(i), "functions"))[1] for i in range(2)]
    first, second = (record.body for record in records)
    assert first is not None
    assert second is not None
    assert first["functions"] is second["functions"]


def test_responses_share_both_the_body_tools_and_their_chat_view() -> None:
    curation = setup()
    tools = [{"type": "function", "name": "ls", "parameters": {"type": "object"}}]
    bodies = [orjson.dumps({"model": "gpt-4o", "input": n, "tools": tools}) for n in "ab"]
    first, second = (planned(curation, raw, RESPONSES)[1] for raw in bodies)
    assert first.body is not None
    assert second.body is not None
    assert second.body["tools"] is first.body["tools"]
    assert second.facts["tools"] is first.facts["tools"]
    assert first.facts["tools"] is not first.body["tools"]


def test_an_agents_next_turn_gets_the_same_list() -> None:
    """Not only requests in flight at once: sequential turns share too."""
    curation = setup()
    first = planned(curation, chat_body(TOOLS, "one"))[1].body
    assert first is not None
    tools = first["tools"]
    del first
    second = planned(curation, chat_body(TOOLS, "two"))[1].body
    assert second is not None
    assert second["tools"] is tools


def test_the_lists_kept_are_bounded_by_their_json_the_least_recently_used_going() -> None:
    lists = [[{"name": f"tool{i}", "pad": "x" * 90}] for i in range(4)]
    size = len(orjson.dumps(lists[0]))

    def again(i: int) -> list[Any]:
        return orjson.loads(orjson.dumps(lists[i]))  # equal, not the same list

    shared = SharedTools(limit_bytes=3 * size)
    firsts = [shared.shared(tools) for tools in lists[:3]]
    assert shared.shared(again(0)) is firsts[0]  # used again: the newest now
    shared.shared(lists[3])  # one over the limit: the least recently used goes
    assert len(shared) == 3
    assert shared.shared(again(0)) is firsts[0]
    assert shared.shared(again(1)) is not firsts[1]
    too_big = SharedTools(limit_bytes=size - 1)
    too_big.shared(lists[0])
    assert len(too_big) == 0


def test_what_is_not_a_non_empty_list_of_json_is_left_alone() -> None:
    shared = SharedTools()
    opaque = [object()]
    body: dict[str, Any] = {"tools": [], "functions": {"a": 1}}
    shared.share(body)
    assert body == {"tools": [], "functions": {"a": 1}}
    assert type(body["tools"]) is list
    assert shared.shared(opaque) is opaque
    assert len(shared) == 0


TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=5)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=12,
)


@given(st.lists(st.lists(JSON, min_size=1, max_size=4), min_size=1, max_size=3), st.data())
def test_sharing_never_changes_a_body_and_shares_exactly_the_equal_ones(
    pool: list[list[Any]], data: st.DataObject
) -> None:
    picks = data.draw(st.lists(st.integers(0, len(pool) - 1), min_size=2, max_size=6))
    shared = SharedTools()
    bodies = [orjson.loads(orjson.dumps({"tools": pool[i]})) for i in picks]
    before = [orjson.dumps(body) for body in bodies]
    for body in bodies:
        shared.share(body)
    assert [orjson.dumps(body) for body in bodies] == before
    for a, b in itertools.combinations(bodies, 2):
        assert (a["tools"] is b["tools"]) == (orjson.dumps(a) == orjson.dumps(b))
