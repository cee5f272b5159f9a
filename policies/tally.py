"""Tally: one request's token counts, by message identity.

A chain asks for the same counts again and again: the total before and after, and each
curator its own, for the same message objects. The counter's cache makes a repeat cheap
but not free: every lookup serializes and hashes the message again, and a 127k-token
request did that about a thousand times. A tally hashes and counts each message once per
request and answers repeats by `id()`. It keeps every message it counted alive, so an
`id()` cannot be reused while the tally lives; build one per request (`CurationContext`
does), as messages are never mutated during one.

A curator that rewrites a message's content knows the new count without encoding the
rest of it again: the cookbook formula is a sum over keys (`policies.formula`), so
`replaced` counts the new message as the old one without its content plus the new
content. Long contents that had to be encoded keep a split profile for the request
(`policies.splits`), so cutting them re-encodes only near the cut.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from policies.describe import content_bytes
from policies.digests import digest
from policies.formula import Sink
from policies.messages import Content, Message, tool_names
from policies.splits import Profile
from policies.tokens import CACHE_MIN_CHARS, REPLY_PRIMING, Plan, TokenCounter


class _Seen:
    """What the tally knows about one message object."""

    __slots__ = ("bare", "key", "msg", "tokens")

    def __init__(self, msg: Message, tokens: int, key: bytes | None) -> None:
        self.msg, self.tokens, self.key = msg, tokens, key
        self.bare: int | None = None


class Tally:
    """Token counts of one request's messages, each message hashed and counted once."""

    __slots__ = ("_names", "_seen", "_sink", "_texts", "counter", "model")

    def __init__(self, counter: TokenCounter, model: str, profile_chars: int | None) -> None:
        """`profile_chars`: strings at least this long get a split profile when counted
        (`formula.Sink`); None: none do."""
        self.counter, self.model = counter, model
        self._seen: dict[int, _Seen] = {}
        self._sink = Sink()
        self._sink.profile_chars = profile_chars
        self._texts: dict[str, int] = {}
        self._names: dict[int, tuple[Message, Mapping[str, str]]] = {}

    # -- messages --------------------------------------------------------------------
    def each(self, messages: Sequence[Message]) -> list[int]:
        """Tokens of each message (`TokenCounter.count_each`)."""
        seen = self._seen
        fresh = [m for m in messages if id(m) not in seen]
        if fresh:
            sink = self._sink
            keys, counts = self.counter.measure(fresh, self.model, sink)
            for msg, key, tokens in zip(fresh, keys, counts, strict=True):
                found = seen[id(msg)] = _Seen(msg, tokens, key)
                found.bare = sink.bare.pop(id(msg), None)
        return [seen[id(m)].tokens for m in messages]

    def one(self, msg: Message) -> int:
        hit = self._seen.get(id(msg))
        return hit.tokens if hit is not None else self.each((msg,))[0]

    def total(self, messages: Sequence[Message]) -> int:
        """Prompt tokens of these messages, reply priming included."""
        return sum(self.each(messages)) + REPLY_PRIMING

    def bare(self, msg: Message) -> int:
        """Tokens of this message with an empty content: all it costs but its content."""
        hit = self._seen.get(id(msg))
        if hit is None:
            self.one(msg)
            hit = self._seen[id(msg)]
        if hit.bare is None:
            if hit.key is None:
                hit.bare = self._bare(msg)
            else:  # a history is resent every turn: remembered with the message
                hit.bare = self.counter.remember(hit.key + b"|bare", lambda: (self._bare(msg),))[0]
        return hit.bare

    def _bare(self, msg: Message) -> int:
        empty = {**msg, "content": ""}
        # A result's other fields are a role and an id: encoding them beats hashing.
        small = all(isinstance(v, str) and len(v) < CACHE_MIN_CHARS for v in empty.values())
        return self.counter.direct(empty, self.model) if small else self.one(empty)

    def replaced(
        self, msg: Message, content: Content, tokens: int | None = None, tag: bytes = b""
    ) -> Message:
        """`msg` with this content, counted as `bare(msg)` plus the content's `tokens`
        (counted here when not given); with a `tag`, filed under a key derived from
        `msg`'s (see `note`)."""
        new = {**msg, "content": content}
        if tokens is None:
            if not isinstance(content, str):
                return new  # counted in full when asked
            tokens = self.text(content)
        bare = self.bare(msg)
        self.note(new, bare + tokens, bare, source=(msg, tag) if tag else None)
        return new

    def remember(self, msg: Message, tag: bytes, compute: Callable[[], Plan]) -> Plan:
        """What a curator computed from `msg` alone, remembered with the message across
        requests (a history is resent every turn). `tag` names the curator and each
        parameter the plan depends on."""
        hit = self._seen.get(id(msg))
        if hit is None or hit.key is None:  # a message a curator made: no key to file under
            return compute()
        return self.counter.remember(hit.key + tag, compute)

    def remember_text(self, msg: Message, tag: bytes, compute: Callable[[], str]) -> str:
        """`remember`, for a text computed from `msg` alone (a description of it)."""
        hit = self._seen.get(id(msg))
        if hit is None or hit.key is None:
            return compute()
        return self.counter.remember_text(hit.key + tag, compute)

    def tool_names(self, msg: Message) -> Mapping[str, str]:
        """`messages.tool_names`, once per message: several curators ask for each block."""
        found = self._names.get(id(msg))
        if found is None or found[0] is not msg:
            found = self._names[id(msg)] = (msg, tool_names(msg))
        return found[1]

    def note(
        self,
        msg: Message,
        tokens: int,
        bare: int | None = None,
        *,
        source: tuple[Message, bytes] | None = None,
    ) -> None:
        """Record a count derived exactly by a curator, so nobody encodes `msg` again
        (and its `bare` count, when known). A message made from another by a rule named by
        a tag, `source=(original, tag)`, is filed under a key derived from the original's,
        so what later curators `remember` about it is remembered too."""
        key = None
        if source is not None:
            found = self._seen.get(id(source[0]))
            if found is not None and found.key is not None:
                key = digest(found.key, source[1])
        seen = self._seen[id(msg)] = _Seen(msg, tokens, key)
        seen.bare = bare

    # -- texts -----------------------------------------------------------------------
    def text(self, text: str) -> int:
        if len(text) >= CACHE_MIN_CHARS:
            return self.counter.count_text(text, self.model)
        # Markers and placeholders repeat within a request, and short texts are not cached.
        found = self._texts.get(text)
        if found is None:
            found = self._texts[text] = self.counter.count_text(text, self.model)
        return found

    def profile(self, text: str) -> Profile | None:
        """The split profile this request's counting left for `text`, if any."""
        found = self._sink.profiles.get(id(text))
        return found if found is not None and found.text is text else None

    def content_bytes(self, content: object) -> int:
        """`describe.content_bytes`, from the profile of a long string when it has one."""
        profile = self.profile(content) if isinstance(content, str) else None
        return profile.size if profile is not None else content_bytes(content)

    def fit(self, text: str, max_tokens: int, *, from_end: bool) -> int:
        """Characters of the longest head (or tail) of `text` within `max_tokens`."""
        profile = self.profile(text)
        return self.counter.fit(text, self.model, max_tokens, from_end=from_end, profile=profile)

    def span(self, text: str, start: int, stop: int) -> int:
        """Tokens of `text[start:stop]`."""
        profile = self.profile(text)
        if profile is not None and profile.enc is self.counter.encoder(self.model):
            return profile.count(start, stop)
        return self.text(text[start:stop])

    def joined(self, text: str, head: int, middle: str, tail: int) -> int:
        """Tokens of `text[:head] + middle + text[len(text) - tail:]`."""
        profile = self.profile(text)
        if profile is not None and profile.enc is self.counter.encoder(self.model):
            return profile.count_joined(head, middle, tail)
        return self.text(text[:head] + middle + text[len(text) - tail :])
