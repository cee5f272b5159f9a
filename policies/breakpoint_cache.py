"""Prefix-cache reads where the client set breakpoints, as Anthropic matches them.

Without breakpoints a provider caches automatically (OpenAI): a prompt reads the longest
prefix it shares with any earlier one (`policies.prefix_cache`). With them (`cache_control`,
`policies.marks`) only what a breakpoint wrote can be read, so that model credits reads
no provider gives. Anthropic's rules, at our block granularity (the tools, then each
message; the reply priming is no provider block):

- a request writes the prefix that ends at each of its breakpoints, past what it read,
  when that prefix holds at least the minimum of tokens;
- it reads, at each of its breakpoints, the longest prefix written before that ends at
  most `LOOKBACK_BLOCKS` provider content blocks before the breakpoint (a message stands
  for as many blocks as it has parts and tool calls: `provider_blocks`); the longest read
  of any breakpoint is what is billed as read, to the token (no 128-token steps).

A breakpoint on a part before a message's last is taken as ending the message: a prefix
can only end where one of our blocks does. The caching fake (tests/fakes/anthropic_cache.py)
implements the same rules on Anthropic's own blocks; tests compare the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from policies.messages import Message

LOOKBACK_BLOCKS = 20

Edges = dict[tuple[int, bytes], int]
"""A trie of every block path seen so far: (parent node, block key) -> node (root: 0)."""


class Block(Protocol):
    """A prompt block as matching reads it (`policies.prefix_cache.Block`)."""

    @property
    def key(self) -> bytes: ...
    @property
    def tokens(self) -> int: ...
    @property
    def mark(self) -> bool: ...
    @property
    def width(self) -> int: ...


def provider_blocks(msg: Message) -> int:
    """The provider content blocks a neutral message stands for (at least one; a tool
    result is one block, whatever it holds)."""
    if msg.get("role") == "tool":
        return 1
    content = msg.get("content")
    calls = msg.get("tool_calls")
    parts = len(content) if type(content) is list else 1
    return max(1, parts + (len(calls) if type(calls) is list else 0))


def path(edges: Edges, blocks: Sequence[Block]) -> tuple[list[int], int]:
    """A prompt's node for each of its blocks, inserted into `edges`, and the tokens of
    its longest prefix seen before."""
    nodes: list[int] = []
    node, shared, matching = 0, 0, True
    for block in blocks:
        child = edges.get((node, block.key)) if matching else None
        if child is None:
            matching = False
            child = edges[(node, block.key)] = len(edges) + 1
        else:
            shared += block.tokens
        nodes.append(node := child)
    return nodes, shared


def read(edges: Edges, written: set[int], blocks: Sequence[Block], min_tokens: int) -> int:
    """The tokens a prompt of these blocks reads from the prefixes `written` before; what
    it writes is added to `written` (and its path to `edges`)."""
    nodes, _ = path(edges, blocks)
    upto, ends, tokens, at = [], [], 0, 0
    for block in blocks:
        tokens += block.tokens
        at += block.width
        upto.append(tokens)
        ends.append(at)
    marks = [i for i, block in enumerate(blocks) if block.mark]
    found = -1
    for mark in marks:
        i = mark
        while i > found and ends[mark] - ends[i] <= LOOKBACK_BLOCKS:
            if nodes[i] in written:
                found = i
                break
            i -= 1
    done = upto[found] if found >= 0 else 0
    for mark in marks:
        if upto[mark] > done and upto[mark] >= min_tokens:
            written.add(nodes[mark])
            done = upto[mark]
    return upto[found] if found >= 0 else 0
