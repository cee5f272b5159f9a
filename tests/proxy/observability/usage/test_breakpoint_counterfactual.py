"""The counterfactual's cache reads where the client set breakpoints, against the fakes.

Each request goes to the strict fakes' own caches (tests/fakes/anthropic_cache.py: reads
at breakpoints with Anthropic's 20-block lookback, writes at breakpoints; caching.py:
OpenAI's automatic prefix cache, per `prompt_cache_key`) and to the proxy's model of them
(`Counterfactuals`, fed the Messages protocol's neutral messages). Their cached tokens must
be equal, request by request. Token counts are the fake's, block by block, so only the
matching rules are compared.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import tiktoken

from policies.prefix_cache import Block, PrefixCache, Prompt, message_blocks, tools_block
from proxy.config.limits import Limits
from proxy.observability.usage.counterfactual import Counterfactuals
from proxy.observability.usage.spend import cache_partition
from proxy.protocols.anthropic.neutral import INDEX, SLOT, SYSTEM
from proxy.protocols.anthropic.protocol import ANTHROPIC
from tests.fakes.anthropic_cache import MessagesCache, block_tokens
from tests.fakes.caching import PromptCache

ENC = tiktoken.get_encoding("cl100k_base")
MARK = {"type": "ephemeral"}
TOOLS = [
    {"name": "read", "description": "Reads a file. " * 40, "input_schema": {"type": "object"}},
    {"name": "bash", "description": "Runs a command. " * 40, "input_schema": {"type": "object"}},
]


def text(s: str, mark: bool = False) -> dict[str, Any]:
    return {"type": "text", "text": s, **({"cache_control": MARK} if mark else {})}


def turns(n: int) -> Iterator[list[dict[str, Any]]]:
    """An agent's messages after each of its `n` steps (a call, its result, a note)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [text("Fix the build.")]}]
    for k in range(n):
        out = f"line {k} " * (40 + 13 * (k % 5))
        messages.append(
            {
                "role": "assistant",
                "content": [
                    text(f"Step {k}: reading."),
                    {"type": "tool_use", "id": f"t{k}", "name": "read", "input": {"k": k}},
                ],
            }
        )
        result = {"type": "tool_result", "tool_use_id": f"t{k}", "content": out}
        messages.append({"role": "user", "content": [result, text(f"note {k}")]})
        yield list(messages)


def marked_last(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Claude Code's habit: a breakpoint on the newest message's last block."""
    last = messages[-1]
    blocks = [*last["content"][:-1], {**last["content"][-1], "cache_control": MARK}]
    return [*messages[:-1], {**last, "content": blocks}]


def body(messages: list[dict[str, Any]], *, mark_tools: bool = True) -> dict[str, Any]:
    tools = [*TOOLS[:-1], {**TOOLS[-1], **({"cache_control": MARK} if mark_tools else {})}]
    system = [text("You are a careful coding agent. " * 20), text("Rules. " * 300, mark=True)]
    return {"model": "claude-sonnet-4-5", "max_tokens": 100, "tools": tools,
            "system": system, "messages": messages}  # fmt: skip


def our_prompt(sent: dict[str, Any]) -> Prompt:
    """The neutral messages' prompt, each block of the fake's own token count."""
    wire = ANTHROPIC.parse(orjson.dumps(sent), Limits())
    assert wire.skip is None
    sizes = [_tokens(sent, m) for m in wire.messages]
    keys = [_key(m) for m in wire.messages]
    tools = sent.get("tools") or []
    blocks = [tools_block(b"T", sum(block_tokens(t, ENC) for t in tools), tools)] if tools else []
    blocks.extend(message_blocks(keys, sizes, wire.messages, _key))
    return Prompt((*blocks, Block(b"priming", 0, width=0)))


def _key(msg: Any) -> bytes:
    return orjson.dumps(msg, option=orjson.OPT_SORT_KEYS)


def _tokens(sent: dict[str, Any], msg: Any) -> int:
    i = msg[INDEX]
    if i == SYSTEM:
        return sum(block_tokens(b, ENC) for b in sent["system"])
    content = sent["messages"][i]["content"]
    if msg["role"] == "tool":
        return block_tokens(content[msg[SLOT]], ENC)
    start = msg.get(SLOT, 0) if msg["role"] == "user" else 0
    return sum(block_tokens(b, ENC) for b in content[start:])


def compare(bodies: list[dict[str, Any]]) -> list[tuple[int, int]]:
    fake, ours = MessagesCache(), Counterfactuals(PrefixCache())
    found = []
    for sent in bodies:
        counts = [block_tokens(b, ENC) for b in _all_blocks(sent)]
        reported = fake.usage(sent, counts)["cache_read_input_tokens"]
        found.append((reported, ours.cached_tokens("c", "m", our_prompt(sent))))
    return found


def _all_blocks(sent: dict[str, Any]) -> Iterator[dict[str, Any]]:
    from tests.fakes.anthropic_rules import all_blocks

    return all_blocks(sent)


def test_a_moving_breakpoint_reads_what_the_last_turn_wrote() -> None:
    found = compare([body(marked_last(m)) for m in turns(12)])
    assert [r for r, _ in found] == [o for _, o in found]
    assert all(found[k][0] > found[k - 1][0] > 0 for k in range(2, len(found)))


def test_a_write_beyond_the_lookback_is_not_read() -> None:
    # Turn 13's breakpoint is 27 blocks past turn 4's: the lookback (20) misses it, so
    # only the system's prefix is read; the automatic model credited all of turn 4.
    history = list(turns(14))
    bodies = [body(marked_last(history[k])) for k in (2, 4, 13)]
    found = compare(bodies)
    assert [r for r, _ in found] == [o for _, o in found]
    system_only = compare([body(history[0])] * 2)[1][0]
    assert found[2][0] == system_only < found[1][0]
    unmarked = [body(history[k], mark_tools=False) for k in (2, 4, 13)]
    automatic = PrefixCache(increment=1).price(_without_marks(our_prompt(b)) for b in unmarked)
    assert automatic.requests[2].cached_tokens > found[1][0]


def _without_marks(prompt: Prompt) -> Prompt:
    return Prompt(tuple(Block(b.key, b.tokens) for b in prompt.blocks))


def test_without_a_mark_on_the_messages_only_the_system_is_read() -> None:
    found = compare([body(m, mark_tools=False) for m in turns(6)])
    assert [r for r, _ in found] == [o for _, o in found]
    assert len({r for r, _ in found[1:]}) == 1, "the same system prefix every turn"
    assert found[1][0] > 0


def test_an_edited_history_reads_up_to_the_edit() -> None:
    steps = list(turns(8))
    edited = [dict(m) for m in steps[-1]]
    edited[4] = {**edited[4], "content": [edited[4]["content"][0], text("an edited note")]}
    found = compare([body(marked_last(steps[-2])), body(marked_last(edited))])
    assert [r for r, _ in found] == [o for _, o in found]


# -- OpenAI's automatic caching, keyed by prompt_cache_key ---------------------------------
@pytest.mark.parametrize(("first", "second", "shares"), [("a", "a", True), ("a", "b", False)])
def test_prompt_cache_keys_partition_the_cache(first: str, second: str, shares: bool) -> None:
    fake, ours = PromptCache(), Counterfactuals(PrefixCache())
    system = {"role": "system", "content": "Be brief. " * 600}
    results = []
    for key, question in ((first, "one"), (second, "two")):
        sent = {
            "messages": [system, {"role": "user", "content": question}],
            "prompt_cache_key": key,
        }
        tokens = [len(ENC.encode_ordinary(orjson.dumps(m).decode())) for m in sent["messages"]]
        reported = fake.cached(sent, ENC, sum(tokens))
        prompt = Prompt(
            tuple(Block(orjson.dumps(m), n) for m, n in zip(sent["messages"], tokens, strict=True))
        )
        results.append((reported, ours.cached_tokens("c", "m", prompt, cache_partition(sent))))
    assert (results[1][0] > 0) is shares
    assert (results[1][1] > 0) is shares
