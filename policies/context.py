"""The context a curator is handed: the request's facts, and how it counts tokens.

Curators count through the context (`count`, `count_text`, ...) and nothing else. A chain
asks for the same counts again and again, for the same message objects: the total before
and after, and each curator its own. The counter's cache makes a repeat cheap but not free
(it serializes and hashes the message again; a 127k-token request did that about a
thousand times), so the context counts each message once per request and answers repeats
by `id()`. It keeps every message it counted alive, so an `id()` cannot be reused while it
lives: build one per request (`Policy.context` does), as messages are never mutated
during one.

A curator that rewrites a content knows the new count without encoding the rest of the
message again: the cookbook formula is a sum over keys (`policies.formula`), so
`with_content` counts the new message as the old one without its content plus the new
content. Long contents that had to be encoded keep a split profile for the request
(`policies.splits`), so cutting them re-encodes only near the cut.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from policies.describe import content_bytes
from policies.digests import digest
from policies.formula import Sink
from policies.marks import carried
from policies.messages import Content, Message, role, tool_names
from policies.splits import PROFILE_MIN_CHARS, Profile
from policies.summary_io import Services
from policies.tokens import CACHE_MIN_CHARS, REPLY_PRIMING, Plan, TokenCounter


class _Seen:
    """What the context knows about one message object."""

    __slots__ = ("bare", "key", "msg", "tokens")

    def __init__(self, msg: Message, tokens: int, key: bytes | None, bare: int | None) -> None:
        self.msg, self.tokens, self.key, self.bare = msg, tokens, key, bare


@dataclass(frozen=True, slots=True)
class PinSpec:
    """Which messages are pinned: these roles, plus the first user message if asked."""

    roles: frozenset[str] = frozenset({"system", "developer"})
    first_user: bool = False

    def pinned(self, messages: Sequence[Message]) -> frozenset[int]:
        pins = {i for i, m in enumerate(messages) if role(m) in self.roles}
        if self.first_user:
            first = next((i for i, m in enumerate(messages) if role(m) == "user"), None)
            if first is not None:
                pins.add(first)
        return frozenset(pins)


@dataclass(frozen=True, slots=True)
class CurationContext:
    """Per-request facts a curator may use, and how it counts. Built once per request;
    never mutate a message it has counted."""

    model: str
    counter: TokenCounter
    budget: int
    """Tokens the messages may use: window - output reserve - tool definitions - priming."""
    tools_tokens: int = 0
    """Tokens of the request's tool definitions, which `budget` leaves room for."""
    pins: PinSpec = field(default_factory=PinSpec)
    on_overflow: Literal["truncate", "reject", "forward"] = "truncate"
    services: Services | None = None
    """Needed by async curators only; None where no model may be called."""
    profile_chars: int | None = PROFILE_MIN_CHARS
    """Texts at least this long are counted so that cutting them is cheap (`TextCutter`);
    None: no text is. The chain sets it from its curators."""
    _seen: dict[int, _Seen] = field(init=False, repr=False, compare=False)
    _sink: Sink = field(init=False, repr=False, compare=False)
    _texts: dict[str, int] = field(init=False, repr=False, compare=False)
    _names: dict[int, tuple[Message, Mapping[str, str]]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        sink = Sink()
        sink.profile_chars = self.profile_chars
        for name, value in (("_seen", {}), ("_sink", sink), ("_texts", {}), ("_names", {})):
            object.__setattr__(self, name, value)

    def pinned(self, messages: Sequence[Message]) -> frozenset[int]:
        return self.pins.pinned(messages)

    # -- counting: every curator ------------------------------------------------------
    def count(self, msg: Message) -> int:
        """Tokens of one message, its per-message overhead included."""
        hit = self._seen.get(id(msg))
        return hit.tokens if hit is not None else self.count_each((msg,))[0]

    def count_each(self, messages: Sequence[Message]) -> list[int]:
        """`count` of each message, the new ones measured in one batch."""
        seen = self._seen
        try:  # most calls: every message already counted (curators pass lists along)
            return [seen[id(m)].tokens for m in messages]
        except KeyError:
            pass
        fresh = [m for m in messages if id(m) not in seen]
        if fresh:
            sink = self._sink
            keys, counts = self.counter.measure(fresh, self.model, sink)
            for msg, key, tokens in zip(fresh, keys, counts, strict=True):
                seen[id(msg)] = _Seen(msg, tokens, key, sink.bare.pop(id(msg), None))
        return [seen[id(m)].tokens for m in messages]

    def keys(self, messages: Sequence[Message]) -> tuple[bytes | None, ...]:
        """Each message's digest as the token counter keys it (None if not counted yet).
        For messages the client sent: a curator's new message has a key derived from
        its source's instead (see `with_content`)."""
        seen = self._seen
        return tuple(hit.key if (hit := seen.get(id(m))) is not None else None for m in messages)

    def count_total(self, messages: Sequence[Message]) -> int:
        """Prompt tokens of these messages, reply priming included."""
        return sum(self.count_each(messages)) + REPLY_PRIMING

    def count_text(self, text: str) -> int:
        if len(text) >= CACHE_MIN_CHARS:
            return self.counter.count_text(text, self.model)
        # Markers and placeholders repeat within a request, and short texts are not cached.
        found = self._texts.get(text)
        if found is None:
            found = self._texts[text] = self.counter.count_text(text, self.model)
        return found

    def count_bare(self, msg: Message) -> int:
        """Tokens of `msg` with an empty content: all it costs but its content."""
        hit = self._seen.get(id(msg))
        if hit is None:
            self.count(msg)
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
        return self.counter.direct(empty, self.model) if small else self.count(empty)

    # -- rewriting a message ----------------------------------------------------------
    def with_content(
        self, msg: Message, content: Content, tokens: int | None = None, *, tag: bytes = b""
    ) -> Message:
        """`msg` with this content, counted as `count_bare(msg)` plus the content's
        `tokens` when given (a cutter knows them), else counted here. A `tag` (see
        `recall`) says the content was made from `msg`'s alone by the rule it names, so
        what is recalled about the new message is remembered across requests too."""
        # A rewrite keeps the client's breakpoint on what stands for the content (marks.py).
        new = {**msg, "content": carried(msg.get("content"), content)}
        if tokens is None:
            if not isinstance(content, str):
                return new  # counted in full when asked
            tokens = self.count_text(content)
        bare = self.count_bare(msg)
        key = None
        if tag:
            found = self._seen.get(id(msg))
            key = digest(found.key, tag) if found is not None and found.key is not None else None
        self._seen[id(new)] = _Seen(new, bare + tokens, key, bare)
        return new

    def recall(self, msg: Message, tag: bytes, compute: Callable[[], Plan]) -> Plan:
        """`compute()`: numbers a curator derives from `msg` alone, remembered with the
        message across requests (a history is resent every turn). `tag` names the
        curator and each parameter the numbers depend on."""
        hit = self._seen.get(id(msg))
        if hit is None or hit.key is None:  # a message a curator made: no key to file under
            return compute()
        # The message's bare count is filed with the plan: a rewrite needs it next.
        stored = self.counter.remember(hit.key + tag, lambda: (*compute(), self.count_bare(msg)))
        if hit.bare is None:
            hit.bare = stored[-1]
        return stored[:-1]

    def recall_text(self, msg: Message, tag: bytes, compute: Callable[[], str]) -> str:
        """`recall`, for a text derived from `msg` alone (a description of it)."""
        hit = self._seen.get(id(msg))
        if hit is None or hit.key is None:
            return compute()
        return self.counter.remember_text(hit.key + tag, compute)

    def tool_names(self, msg: Message) -> Mapping[str, str]:
        """`messages.tool_names(msg)`, read once per message: several curators ask."""
        found = self._names.get(id(msg))
        if found is None or found[0] is not msg:
            found = self._names[id(msg)] = (msg, tool_names(msg))
        return found[1]

    # -- cutting a text: curators that shorten contents -------------------------------
    def _profile(self, text: str) -> Profile | None:
        """The split profile this request's counting left for `text`, if any."""
        found = self._sink.profiles.get(id(text))
        return found if found is not None and found.text is text else None

    def content_bytes(self, content: object) -> int:
        """`describe.content_bytes(content)`: the UTF-8 size of a content's text."""
        profile = self._profile(content) if isinstance(content, str) else None
        return profile.size if profile is not None else content_bytes(content)

    def fit_head(self, text: str, max_tokens: int) -> int:
        """Characters of the longest start of `text` within `max_tokens` tokens."""
        profile = self._profile(text)
        return self.counter.fit(text, self.model, max_tokens, from_end=False, profile=profile)

    def fit_tail(self, text: str, max_tokens: int) -> int:
        """Characters of the longest end of `text` within `max_tokens` tokens."""
        profile = self._profile(text)
        return self.counter.fit(text, self.model, max_tokens, from_end=True, profile=profile)

    def count_span(self, text: str, start: int, stop: int) -> int:
        """Tokens of `text[start:stop]`."""
        profile = self._profile(text)
        if profile is not None and profile.enc is self.counter.encoder(self.model):
            return profile.count(start, stop)
        return self.count_text(text[start:stop])

    def count_joined(self, text: str, head: int, middle: str, tail: int) -> int:
        """Tokens of `text[:head] + middle + text[len(text) - tail:]`."""
        profile = self._profile(text)
        if profile is not None and profile.enc is self.counter.encoder(self.model):
            return profile.count_joined(head, middle, tail)
        return self.count_text(text[:head] + middle + text[len(text) - tail :])
