"""Anthropic-style prompt caching for the fake Messages server, independent of `proxy/`.

Anthropic caches the prefix of a prompt (tools, then system, then messages, block by
block) up to each block marked `cache_control`. A later request reads the longest such
prefix it has written before, looking back up to 20 blocks from each of its own
breakpoints, and writes the prefixes up to its breakpoints beyond that. A prefix under the
model's minimum (1,024 tokens here) is never cached. Usage reports what was read
(`cache_read_input_tokens`), written (`cache_creation_input_tokens`, split 5m/1h by the
breakpoint's `ttl`) and the rest (`input_tokens`). Each model has a cache of its own;
`expire` drops them all, and the `ledger` says per request what was re-billed and why
(`tests.fakes.anthropic_ledger`).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Any

import orjson
import tiktoken

from tests.fakes.anthropic_ledger import Previous, entry, owners
from tests.fakes.anthropic_rules import all_blocks
from tests.fakes.cache_ledger import Billed

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
    """The prefixes written so far (by digest, the model's name its seed); thread-safe."""

    def __init__(self, min_tokens: int = MIN_TOKENS) -> None:
        self.min_tokens = min_tokens
        self._written: set[bytes] = set()
        self._last: dict[str, Previous] = {}
        self._epoch = 0
        self.ledger: list[Billed] = []
        self._lock = threading.Lock()

    def reset(self) -> None:
        with self._lock:
            self._written.clear()
            self._last.clear()
            self.ledger.clear()

    def expire(self) -> None:
        """Drop every cached prefix, as the provider does after minutes without a hit."""
        with self._lock:
            self._written.clear()
            self._epoch += 1

    def usage(
        self, body: dict[str, Any], counts: Sequence[int], session: str = ""
    ) -> dict[str, Any]:
        blocks = list(all_blocks(body))
        model = str(body.get("model"))
        digests = _prefix_digests(blocks, model)
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
            self._account(session, model, body, digests, upto, read)
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

    def _account(
        self,
        session: str,
        model: str,
        body: dict[str, Any],
        digests: list[bytes],
        upto: list[int],
        read: int,
    ) -> None:
        """The ledger's entry for this request; it becomes the session's last."""
        elements = list(owners(body))
        last = self._last.get(session)
        self.ledger.append(entry(session, model, last, digests, elements, read, self._epoch))
        held = max((upto[i] for i, d in enumerate(digests) if d in self._written), default=0)
        self._last[session] = Previous(model, digests, held, self._epoch)

    def _read_point(self, digests: list[bytes], marks: list[int]) -> int:
        best = -1
        for mark in marks:
            for i in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                if digests[i] in self._written:
                    best = max(best, i)
                    break
        return best


def _prefix_digests(blocks: list[dict[str, Any]], model: str) -> list[bytes]:
    out: list[bytes] = []
    h = hashlib.sha256(model.encode() + b"\0")
    for block in blocks:
        kept = {k: v for k, v in block.items() if k != "cache_control"}
        h.update(orjson.dumps(kept, option=orjson.OPT_SORT_KEYS))
        out.append(h.copy().digest())
    return out
