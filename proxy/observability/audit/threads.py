"""Which conversation a record belongs to when the client sent no `x-session-id`: the one
whose latest request this one's history extends, else a new one.

An agent resends its whole history every turn, grown by what happened since; so a request
whose original messages begin with all of a conversation's latest request's messages is
that conversation's next turn (or a retry of its last one: the same messages). Two runs of
one task share their system prompt and first message, but the second run's first request
does not extend the first run's latest (it is shorter), so it starts a conversation of its
own. Keyed only by the pinned prefix and first message (as before), they were one.

What is remembered per conversation is one digest of its latest history (by the content
addresses of its messages as stored) and its id: `MAX_CONVERSATIONS` of them, the ones used
last kept. A conversation forgotten, or one whose turns a worker other than this one
recorded first, continues under a new id; a client that needs one id across workers,
restarts or edited histories sends `x-session-id`. Two runs started at the same moment (their
first requests identical and both recorded before either's second) share the first turn's
conversation; their second turns then part.
"""

from __future__ import annotations

import hashlib
from collections import Counter, OrderedDict
from collections.abc import Sequence

MAX_CONVERSATIONS = 50_000
"""Latest histories remembered (~150 bytes each: a 16-byte digest, the id and the map's
entry), the conversations used last kept: ~7.5 MB at most."""
ID_CHARS = 16


class Threads:
    """Conversation ids by history extension, for one thread at a time (the record builder's)."""

    __slots__ = ("_by_prefix", "_conversations", "_lengths", "_limit")

    def __init__(self, limit: int = MAX_CONVERSATIONS) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        self._by_prefix: dict[bytes, tuple[str, int]] = {}
        """A digest of a latest history (or of it but its newest message) -> its
        conversation and length."""
        self._conversations: OrderedDict[str, tuple[bytes, ...]] = OrderedDict()
        """Each conversation's digests in `_by_prefix`, the one used last at the end."""
        self._lengths: Counter[int] = Counter()
        """How many digests have each length: only there is a prefix looked up."""
        self._limit = limit

    def __len__(self) -> int:
        return len(self._conversations)

    def assign(self, digests: Sequence[bytes], pinned: int, head: str, seed: str) -> str:
        """The id of the conversation the history `digests` (content addresses of the
        original messages, in order) continues; else a new id, from `head` (the key of the
        pinned prefix and first user message) and `seed` (the record's own id), so that two
        conversations of one task have ids of their own.

        A history continues a conversation when it begins with all of the conversation's
        latest request, or all of it but its newest message when what is left goes past the
        first `pinned` (up to the first user message, which is never left out): a client may
        leave out a transient last message ("continue", a reminder) when it sends the next
        turn."""
        running = hashlib.blake2b(digest_size=16)
        found: str | None = None
        for n, digest in enumerate(digests, 1):
            running.update(digest)
            if n in self._lengths:
                hit = self._by_prefix.get(running.digest())  # a copy: updates go on
                found = hit[0] if hit is not None else found  # the longest one wins
        if found is None:
            mixed = hashlib.blake2b(f"{head}\0{seed}".encode(), digest_size=ID_CHARS // 2)
            found = mixed.hexdigest()
        self._remember(found, digests, pinned)
        return found

    def _remember(self, conversation: str, digests: Sequence[bytes], pinned: int) -> None:
        self._forget(conversation)
        n = len(digests)
        lengths = [n, n - 1] if n - 1 > pinned else [n]
        keys = []
        for length in lengths:
            key = hashlib.blake2b(b"".join(digests[:length]), digest_size=16).digest()
            if key in self._by_prefix:  # another conversation's too: the newer one takes it
                self._drop(key)
            self._by_prefix[key] = (conversation, length)
            self._lengths[length] += 1
            keys.append(key)
        self._conversations[conversation] = tuple(keys)
        while len(self._conversations) > self._limit:
            self._forget(next(iter(self._conversations)))

    def _forget(self, conversation: str) -> None:
        for key in self._conversations.pop(conversation, ()):
            if self._by_prefix.get(key, ("", 0))[0] == conversation:  # not taken since
                self._drop(key)

    def _drop(self, key: bytes) -> None:
        found = self._by_prefix.pop(key, None)
        if found is not None:
            self._lengths[found[1]] -= 1
            if not self._lengths[found[1]]:
                del self._lengths[found[1]]
