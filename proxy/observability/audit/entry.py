"""Audit records (redacted, ready for a sink), built from the exchange's own record.

The audit reads the `ExchangeRecord` the request filled, the one the metrics read too,
with its references to what the proxy already had: the parsed message lists, the response
accumulator or body, the client's Authorization value. All the work (assembling the
response, redacting, serializing, hashing) happens in `RecordBuilder` once the exchange
ended (`audit.building`: on which thread); the audit's names for the record's fields are
given once, in `audit.metadata`. Redaction never fails open: if it raises, every client or
upstream string is masked, or left out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import orjson

from policies.digests import ByIdentity
from policies.messages import Message
from proxy.observability.audit.capture import BodyCapture
from proxy.observability.audit.message_cache import (
    MessageCache,
    StoredMessage,
    message_digest,
    raw_digest,
)
from proxy.observability.audit.metadata import audit_response, metadata
from proxy.observability.audit.redact import Redactor, mask
from proxy.observability.audit.resent import Histories
from proxy.observability.audit.stamps import Stamps
from proxy.observability.audit.texts import Clean, actions_of, error_body
from proxy.observability.audit.threads import Threads
from proxy.observability.exchange import ExchangeRecord
from proxy.observability.usage.audit_fields import KEYS as SPEND_KEYS
from proxy.observability.usage.audit_fields import tools_of
from proxy.observability.usage.conversation import stored_key
from proxy.protocols.base import Assembled
from proxy.protocols.chat import CHAT

CLIENT_DISCONNECT = "client_disconnect"
"""The one reason a response is incomplete that is no failure: the client left."""
FIELD_ORDER = (
    "id", "time", "kind", "parent_id", "route", "policy", "mode", "model", "client", "status",
    "incomplete", "tokens_before", "tokens_after", "skip_reason", "actions", "latency_ms",
    "ttfb_ms", "response", "error", "redaction", *SPEND_KEYS, "tools_digest", "tools",
)  # fmt: skip
"""Keys of `AuditRecord.fields` in the order records show them; messages come last."""


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """A redacted record: JSON-ready fields plus content-addressed messages."""

    time: float
    fields: dict[str, Any]
    original: tuple[StoredMessage, ...]
    curated: tuple[StoredMessage, ...] | None
    """None when the upstream got the original messages."""
    tools: StoredMessage | None = None
    """The request's tool definitions, redacted (also in `fields`, as a JSON fragment)."""
    remake: Callable[[bytes], bytes] | None = None
    """Redacts again the message of a digest whose body the record left out."""

    def body(self, message: StoredMessage) -> bytes:
        """The message's redacted JSON, made again if the record left it out."""
        if message.data is not None:
            return message.data
        if self.remake is None:
            raise ValueError("a record without a message's body cannot make it again")
        return self.remake(message.digest)

    def to_json(self) -> bytes:
        """One self-contained JSON object (full messages, not hashes)."""
        curated = self.original if self.curated is None else self.curated
        return orjson.dumps(
            {
                **self.fields,
                "original": [orjson.Fragment(self.body(m)) for m in self.original],
                "curated": [orjson.Fragment(self.body(m)) for m in curated],
            }
        )

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = orjson.loads(self.to_json())
        return data


class RecordBuilder:
    """Turns entries into redacted records, for one thread at a time (`audit.building`)."""

    def __init__(
        self,
        redactor: Redactor,
        *,
        store_responses: bool = True,
        cache_bytes: int = 32 * 1024 * 1024,
        by_reference: bool = False,
    ) -> None:
        self.redactor = redactor
        self.store_responses = store_responses
        self._cache = MessageCache(cache_bytes)
        self._by_reference = by_reference
        """The store keeps messages by hash: no bodies cached nor recorded for cache hits."""
        self._sources: dict[bytes, object] = {}
        """The record being built: each left-out body's message, to redact it again."""
        self._histories = Histories() if cache_bytes > 0 else None
        """The conversations' last originals, for a store by reference (`audit.resent`)."""
        self._stamps = Stamps()
        self._threads = Threads()
        """Conversations by history extension, for records without a session id."""
        self._tool_keys = ByIdentity[bytes]()
        self._hidden: frozenset[str] = frozenset()
        """The entry's protocol's own message keys, left out of what is stored."""
        self.last_failure: str | None = None
        """Why the last masked record could not be redacted (the writer logs it)."""

    def build(self, entry: ExchangeRecord) -> AuditRecord:
        self._hidden = (entry.protocol or CHAT).internal_keys
        self._sources = {}
        fields = metadata(entry, self._stamps)
        try:
            return self._content(entry, fields, self.redactor.value, cached=True)
        except Exception as exc:  # never write raw content because redaction broke
            # The type only: an exception message may quote the text being redacted.
            self.last_failure = type(exc).__name__
        fields["redaction"] = "failed"
        try:
            return self._content(entry, fields, mask, cached=False)
        except Exception:  # even masking failed: keep only what the proxy itself assigned
            return AuditRecord(entry.started_at, {k: fields.get(k) for k in FIELD_ORDER}, (), None)

    def _content(
        self, entry: ExchangeRecord, fields: dict[str, Any], clean: Clean, *, cached: bool
    ) -> AuditRecord:
        sent = entry.original or ()
        original = self._originals(sent, entry.keys, clean, cached)
        curated = None
        if entry.curated is not None and entry.curated is not entry.original:
            curated = self._curated(sent, entry.curated, original, clean, cached)
            if curated == original:
                curated = None
        response, error = self._response(entry)
        if error is None and entry.incomplete not in (None, CLIENT_DISCONNECT):
            error = entry.incomplete  # a failure cut the response: say which, not "no error"
        content = {
            "model": entry.model,
            "skip_reason": entry.skip_reason,
            "response": response,
            "error": error,
        }
        tools, tools_fields = self._tools(entry, clean, cached)
        actions = actions_of(entry.actions, clean)
        merged = {**fields, **clean(content), "actions": actions, **tools_fields}
        if merged.get("conversation") is None and original:
            roles = [m.get("role") if isinstance(m, dict) else None for m in sent]
            digests = [m.digest for m in original]
            head = stored_key(digests, roles)
            pinned = next((i + 1 for i, r in enumerate(roles) if r == "user"), len(roles))
            seed = str(fields.get("id"))
            merged["conversation"] = self._threads.assign(digests, pinned, head, seed)
        fields = {k: merged[k] for k in FIELD_ORDER}
        remake = partial(self._remake, self._sources, self._hidden) if self._sources else None
        return AuditRecord(entry.started_at, fields, original, curated, tools, remake)

    def _originals(
        self, sent: Sequence[Message], keys: Sequence[bytes | None], clean: Clean, cached: bool
    ) -> tuple[StoredMessage, ...]:
        """The original messages, redacted; for a store by reference, those the
        conversation's last turn sent too from its history (`audit.resent`)."""
        keys = keys if len(keys) == len(sent) else (None,) * len(sent)
        histories = self._histories if cached and self._by_reference else None
        if histories is None:
            return tuple(
                self._message(m, clean, cached, k) for m, k in zip(sent, keys, strict=True)
            )
        hidden = self._hidden
        known = tuple(k or raw_digest(_visible(m, hidden)) for m, k in zip(sent, keys, strict=True))
        return histories.originals(
            sent, known, lambda m, k: self._message(m, clean, True, k), self._sources
        )

    def _curated(
        self,
        sent: Sequence[Message],
        curated: Sequence[Message],
        original: tuple[StoredMessage, ...],
        clean: Clean,
        cached: bool,
    ) -> tuple[StoredMessage, ...]:
        """The curated messages; those a curator made (a truncated result, say) also lose
        any piece of a secret of the original messages (see `proxy.observability.audit.pieces`)."""
        secret = [m for m, s in zip(sent, original, strict=True) if s.redacted]
        known = self.redactor.found(secret) if cached and secret else ()
        careful = self.redactor.with_known(known).value if known else clean
        # Curators never mutate: a message they kept is the client's own object, stored
        # as it was among the original messages.
        kept = {id(m): s for m, s in zip(sent, original, strict=True)}
        return tuple(
            found if (found := kept.get(id(m))) is not None
            else self._message(m, careful, False) if known
            else self._message(m, clean, cached)
            for m in curated
        )  # fmt: skip

    def _tools(
        self, entry: ExchangeRecord, clean: Clean, cached: bool
    ) -> tuple[StoredMessage | None, dict[str, Any]]:
        """The tools, redacted, and their fields: `tools` (the redacted JSON, a fragment)
        and `tools_digest` (of the tools as sent, what `curator simulate` keys them by).
        Redacted once per distinct list (the cache), hashed once per shared list."""
        tools = tools_of(entry.facts)
        if tools is None:
            return None, {"tools": None, "tools_digest": None}
        key = self._tool_keys.get_or_compute(tools, b"", partial(raw_digest, tools))
        stored = self._message(tools, clean, cached, key, whole=True)
        assert stored.data is not None  # `whole`: the fields quote them
        return stored, {"tools": orjson.Fragment(stored.data), "tools_digest": key.hex()}

    def _message(
        self, msg: object, clean: Clean, cached: bool, key: bytes | None = None, whole: bool = False
    ) -> StoredMessage:
        """`msg` redacted; from the cache when `cached` (its body left out for a store by
        reference, unless the caller needs it `whole`)."""
        msg = _visible(msg, self._hidden)
        if cached and key is None:
            key = raw_digest(msg)
        hit = self._cache.get(key) if key is not None and cached else None
        if hit is not None and hit.data is not None:
            return hit
        if hit is not None and not whole:
            self._sources[hit.digest] = msg
            return hit
        stored = StoredMessage(message_digest(data := _encode(msg, clean)), data)
        if cached and key is not None:
            slim = self._by_reference and not whole
            self._cache.put(key, stored.without_body() if slim else stored)
        return stored

    def _remake(self, sources: dict[bytes, object], hidden: frozenset[str], digest: bytes) -> bytes:
        """A left-out body (`AuditRecord.remake`). Only the cached path leaves one out, and
        its redaction (`Redactor.value`) is a function of the text: the same bytes again."""
        data = _encode(_visible(sources[digest], hidden), self.redactor.value)
        if message_digest(data) != digest:
            raise ValueError("a message redacted again gave other bytes than its hash")
        return data

    def _response(self, entry: ExchangeRecord) -> tuple[dict[str, Any] | None, Any]:
        body = audit_response(entry)
        if body is None:
            return None, None
        if entry.status is not None and entry.status >= 400:
            return None, error_body(body)
        if not self.store_responses:
            return None, None
        if isinstance(body, str):
            parsed = Assembled(body, [], None, None)
        else:
            data = body.data() if isinstance(body, BodyCapture) else body
            parsed = (entry.protocol or CHAT).assemble(data)
        # Cut short: by the accumulator's byte cap, or because the response never ended.
        truncated = isinstance(body, BodyCapture) and body.truncated
        return {**parsed._asdict(), "truncated": truncated or entry.incomplete is not None}, None


def _visible(msg: object, hidden: frozenset[str]) -> object:
    """`msg` without its protocol's own keys (`WireProtocol.internal_keys`)."""
    if hidden and isinstance(msg, dict) and not hidden.isdisjoint(msg):
        return {k: v for k, v in msg.items() if k not in hidden}
    return msg


def _encode(msg: object, clean: Clean) -> bytes:
    # orjson's result keeps a 4 KiB allocation whatever its length; the cache holds an
    # exact-size copy, so its byte budget is what it really uses.
    return bytes(memoryview(orjson.dumps(clean(msg), option=orjson.OPT_SORT_KEYS)))
