"""The prompt that went upstream, as prefix-cache blocks, and where each block came from.

Curators never mutate a message: a message curation kept is the very object the client sent,
so its block (key and tokens) is the client prompt's own, found by identity. Only what
curation rewrote (a cut, a placeholder, a summary) is keyed and counted here, through the
counter's cache, which the curation filled as it counted them.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import cast

from policies.breakpoint_cache import provider_blocks
from policies.marks import marked, unmarked
from policies.messages import Message
from policies.prefix_cache import Block, Prompt
from policies.tokens import TokenCounter


def sent_prompt(
    client: Prompt,
    original: Sequence[Message],
    sent: Sequence[Message],
    counter: TokenCounter,
    model: str,
) -> tuple[Prompt, list[int]]:
    """The blocks of `sent` (tools and reply priming as in `client`, whose messages are
    `original`), and each block's origin: the index of the client block it derives from
    (a rewritten message: the client's next one after the last kept)."""
    lead = len(client.blocks) - len(original) - 1  # the tools block, when there is one
    found = _kept(original, sent, lead)
    fresh = _rewritten_at(found)
    for j in fresh:
        found[j] = 0  # a stand-in, replaced below
    index = cast("list[int]", found)
    blocks = [*client.blocks[:lead], *map(client.blocks.__getitem__, index)]
    origins = [*range(lead), *index]
    if fresh:
        _rewritten(blocks, origins, lead, fresh, sent, counter, model, client.explicit)
    blocks.append(client.blocks[-1])
    origins.append(len(client.blocks) - 1)
    return Prompt(tuple(blocks)), origins


def _kept(original: Sequence[Message], sent: Sequence[Message], lead: int) -> list[int | None]:
    """Each sent message's client block index (None: rewritten). Curation changes a stretch
    in the middle at most: the kept head and tail are matched by identity in C loops, the
    stretch between by a map of the originals there."""
    head = list(map(operator.is_, sent, original))
    p = head.index(False) if False in head else len(head)
    tail = list(map(operator.is_, reversed(sent), reversed(original)))
    s = min(tail.index(False) if False in tail else len(tail), len(sent) - p, len(original) - p)
    middle = sent[p : len(sent) - s]
    at = {id(m): lead + p + i for i, m in enumerate(original[p : len(original) - s])}
    return [
        *range(lead, lead + p),
        *map(at.get, map(id, middle)),
        *range(lead + len(original) - s, lead + len(original)),
    ]


def _rewritten_at(found: list[int | None]) -> list[int]:
    """The positions of None in `found`, searched in C (curation rewrites few messages)."""
    out: list[int] = []
    try:
        while True:
            out.append(found.index(None, out[-1] + 1 if out else 0))
    except ValueError:
        return out


def _rewritten(
    blocks: list[Block],
    origins: list[int],
    lead: int,
    fresh: Sequence[int],
    sent: Sequence[Message],
    counter: TokenCounter,
    model: str,
    explicit: bool,
) -> None:
    """Put in the messages curation rewrote: their own blocks, each derived from the
    client's next message after the last one kept before it. Where the client set
    breakpoints, a rewritten message keeps its own (curation keeps them, `policies.marks`),
    keyed without it as `message_blocks` keys them."""
    messages = [sent[j] for j in fresh]
    keys, counts = counter.measure(messages, model)
    for j, msg, key, tokens in zip(fresh, messages, keys, counts, strict=True):
        block = Block(key, tokens)
        if explicit:
            mark = marked(msg)
            key = counter.measure((unmarked(msg),), model)[0][0] if mark else key
            block = Block(key, tokens, mark, provider_blocks(msg))
        blocks[lead + j] = block
        before = origins[lead + j - 1] if lead + j > 0 else -1
        origins[lead + j] = max(before + 1, lead)
