"""Anthropic-style prompt caching for the fake Messages server, independent of `proxy/`.

Anthropic caches the prefix of a prompt (tools, then system, then messages, block by
block) up to each block marked `cache_control`. A later request reads the longest such
prefix it has written before, looking back up to 20 blocks from each of its own
breakpoints, and writes the prefixes up to its breakpoints beyond that. A prefix under the
model's minimum (1,024 tokens here) is never cached. Usage reports what was read
(`cache_read_input_tokens`), written (`cache_creation_input_tokens`, split 5m/1h by the
breakpoint's `ttl`) and the rest (`input_tokens`).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Any

import orjson
import tiktoken

from tests.fakes.anthropic_rules import all_blocks

MIN_TOKENS = 1024
LOOKBACK = 20


def block_tokens(block: dict[str, Any], enc: tiktoken.Encoding) -> int:
    """A block's tokens as this fake counts them: its JSON without `cache_control`."""
    kept = {k: v for k, v in block.items() if k != "cache_control"}
    return len(enc.encode_ordinary(orjson.dumps(kept, option=orjson.OPT_SORT_KEYS).decode()))


def prompt_tokens(body: dict[str, Any], enc: tiktoken.Encoding) -> list[int]:
    """Each block's tokens, in caching order (tools, system, messages)."""
    return [block_tokens(b, enc) for b in all_blocks(body)]


class MessagesCache:
    """The prefixes written so far (by digest); thread-safe."""

    def __init__(self, min_tokens: int = MIN_TOKENS) -> None:
        self.min_tokens = min_tokens
        self._written: set[bytes] = set()
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._written.clear()

    def usage(self, body: dict[str, Any], counts: Sequence[int]) -> dict[str, Any]:
        blocks = list(all_blocks(body))
        digests = _prefix_digests(blocks)
        marks = [i for i, b in enumerate(blocks) if "cache_control" in b]
        total = sum(counts)
        upto = [sum(counts[: i + 1]) for i in range(len(counts))]
        with self._lock:
            read_at = self._read_point(digests, marks)
            read = upto[read_at] if read_at >= 0 else 0
            written = {"5m": 0, "1h": 0}
            at = read
            for i in marks:
                if upto[i] <= at or upto[i] < self.min_tokens:
                    continue
                ttl = blocks[i]["cache_control"].get("ttl", "5m")
                written["1h" if ttl == "1h" else "5m"] += upto[i] - at
                at = upto[i]
                self._written.add(digests[i])
        creation = written["5m"] + written["1h"]
        return {
            "input_tokens": total - read - creation,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written["5m"],
                "ephemeral_1h_input_tokens": written["1h"],
            },
        }

    def _read_point(self, digests: list[bytes], marks: list[int]) -> int:
        best = -1
        for mark in marks:
            for i in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                if digests[i] in self._written:
                    best = max(best, i)
                    break
        return best


def _prefix_digests(blocks: list[dict[str, Any]]) -> list[bytes]:
    out: list[bytes] = []
    h = hashlib.sha256()
    for block in blocks:
        kept = {k: v for k, v in block.items() if k != "cache_control"}
        h.update(orjson.dumps(kept, option=orjson.OPT_SORT_KEYS))
        out.append(h.copy().digest())
    return out
