"""An agent's resent history, taken whole: the original messages of the records built
last, one list a conversation, so that a turn's record takes the messages its conversation
resends from there instead of looking each one up in the message cache.

An agent sends its whole history every turn, grown by a message or a few; its record
references each message by hash (`message_cache.StoredMessage`). Looked up one by one, each
resent message cost a cache hit, its recency and a `StoredMessage` made from the entry, at
every turn. Here the history is found by its last message's key and compared whole (one
tuple comparison of the keys), and only what follows it is looked up. The bench's warm
163-message record, built again and again in the server: 0.60-0.67 -> 0.20-0.32 ms (three
alternating runs, medians); as the writer builds it the first time, its cache cold after
the next request's curation, ~0.85-0.95 -> ~0.72-0.76 ms.

For a store that keeps messages by reference only (`RecordBuilder`'s `by_reference`): what
is remembered is what the cache holds for such a store, each message's hash and whether
redaction took something out, never a body. A message taken from here is a cache hit by
another way: its body left out of the record, made again if the store lacks it. Keys are
those of the cache (the tally's, or the message's own `raw_digest`), so a message found
here is one the cache would have found, redacted alike. Histories of fewer than
`MIN_MESSAGES` are not remembered (a lookup each is cheap there), and none at all without
the message cache (`audit.cache_bytes: 0`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence

from proxy.observability.audit.message_cache import StoredMessage

_History = tuple[tuple[bytes, ...], tuple[StoredMessage, ...]]
"""A conversation's last original messages: their keys, and each as stored, body left out."""
MAX_MESSAGES = 10_000
"""Messages remembered in all, the conversations used last kept (~170 bytes each, ~1.7 MB).
Each is an object the garbage collector tracks: 64 histories of 163 messages made a full
collection 1.0 -> 2.1 ms here, so this bounds them whatever the histories' lengths."""
MIN_MESSAGES = 16


class Histories:
    """The conversations' last original messages (`MAX_MESSAGES` in all), by their last
    message's key. Used by one thread at a time (the record builder's)."""

    __slots__ = ("_last", "_size")

    def __init__(self) -> None:
        self._last: OrderedDict[bytes, _History] = OrderedDict()
        self._size = 0
        """Messages remembered."""

    def originals(
        self,
        sent: Sequence[object],
        keys: tuple[bytes, ...],
        stored: Callable[[object, bytes], StoredMessage],
        sources: dict[bytes, object],
    ) -> tuple[StoredMessage, ...]:
        """The stored messages of `sent` (keyed `keys`): the longest history remembered that
        `sent` begins with, then `stored(message, key)` for each one after it. A message
        taken from the history is noted in `sources` (its body left out, to make again)."""
        if not MIN_MESSAGES <= len(keys) <= MAX_MESSAGES:
            return tuple(map(stored, sent, keys))
        taken = self._known(keys)
        sources.update(zip([m.digest for m in taken], sent[: len(taken)], strict=True))
        new = tuple(map(stored, sent[len(taken) :], keys[len(taken) :]))
        slim = tuple(m if m.data is None else m.without_body() for m in new)
        self._forget(keys[-1])
        self._last[keys[-1]] = (keys, taken + slim)
        self._size += len(keys)
        while self._size > MAX_MESSAGES:
            self._size -= len(self._last.popitem(last=False)[1][0])
        return taken + new

    def _known(self, keys: tuple[bytes, ...]) -> tuple[StoredMessage, ...]:
        """The longest remembered history `keys` begins with (let go: the turn's own takes
        its place), or none."""
        last = self._last
        for end in range(len(keys), 0, -1):
            found = last.get(keys[end - 1])
            if found is not None and len(found[0]) == end and found[0] == keys[:end]:
                self._forget(keys[end - 1])
                return found[1]
        return ()

    def _forget(self, key: bytes) -> None:
        found = self._last.pop(key, None)
        if found is not None:
            self._size -= len(found[0])
