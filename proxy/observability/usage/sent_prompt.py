"""The prompt that went upstream, as prefix-cache blocks, and where each block came from.

Curators never mutate a message: a message curation kept is the very object the client sent,
so its block (key and tokens) is the client prompt's own, found by identity. Only what
curation rewrote (a cut, a placeholder, a summary) is keyed and counted here, through the
counter's cache, which the curation filled as it counted them.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    at = {id(message): lead + i for i, message in enumerate(original)}
    found = [at.get(id(message)) for message in sent]
    fresh = [m for m, b in zip(sent, found, strict=True) if b is None]
    keys, counts = counter.measure(fresh, model) if fresh else ([], [])
    rewritten = iter(zip(keys, counts, strict=True))
    blocks, origins = list(client.blocks[:lead]), list(range(lead))
    following = lead
    for b in found:
        if b is None:  # rewritten: its own block, derived from the client's next message
            blocks.append(Block(*next(rewritten)))
            origins.append(following)
            continue
        blocks.append(client.blocks[b])
        origins.append(max(b, following))  # a repeat (never seen: curators keep order)
        following = max(b + 1, following)
    blocks.append(client.blocks[-1])
    origins.append(len(client.blocks) - 1)
    return Prompt(tuple(blocks)), origins
