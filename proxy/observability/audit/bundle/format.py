"""The bundle's lines: gzip'd JSON Lines, each message once, before the first record using it.

```
{"curator_audit_bundle": 1, "digest": "blake2b-128"}                 the header, first
{"m": "<32 hex>", "body": {...}}                                      a message (or tools list)
{"t": 1767225600.25, "fields": {...}, "original": "<hex>...", "curated": "<hex>..." | null}
```
A record's `fields` are its stored fields as they are (a field added later travels with the
others, nothing here names them), its tools by reference (`sinks.base.TOOLS_REF`) as in
the store; `original` and `curated` are its messages' digests in order, concatenated, as the
store keeps them. A message's digest is the blake2b-128 of its body's bytes, the body being
the store's own bytes, so a reader checks every body it is given.

The gzip header carries no name and no time: the same records give the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from proxy.observability.audit.message_cache import message_digest
from proxy.observability.audit.sinks.base import DIGEST_SIZE

VERSION = 1
HEADER = orjson.dumps({"curator_audit_bundle": VERSION, "digest": "blake2b-128"}) + b"\n"
COMPRESS_LEVEL = 6
"""zlib's default: level 9 took ~2x the time for ~2% less."""


class BundleError(Exception):
    """A bundle that cannot be read: names the line and what is wrong with it."""


@dataclass(frozen=True, slots=True)
class Message:
    """A message line: a body and its digest (checked)."""

    digest: bytes
    body: bytes


@dataclass(frozen=True, slots=True)
class Record:
    """A record line: as the store holds it (`readers.base.StoredRow`'s parts)."""

    time: float
    fields: bytes
    original: bytes
    curated: bytes | None


def message_line(digest: bytes, body: bytes) -> bytes:
    return b'{"m":"' + digest.hex().encode() + b'","body":' + body + b"}\n"


def record_line(time: float, fields: bytes, original: bytes, curated: bytes | None) -> bytes:
    refs = {"original": original.hex(), "curated": None if curated is None else curated.hex()}
    return orjson.dumps({"t": time, "fields": orjson.Fragment(fields), **refs}) + b"\n"


def parse_line(line: bytes, number: int) -> Message | Record:
    """One line after the header; raises `BundleError` naming `number`."""
    try:
        item = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise BundleError(f"line {number}: not JSON ({exc})") from None
    if isinstance(item, dict) and isinstance(item.get("m"), str) and "body" in item:
        return _message(item, number)
    if isinstance(item, dict) and isinstance(item.get("fields"), dict):
        return _record(item, number)
    raise BundleError(f"line {number}: neither a message nor a record")


def check_header(line: bytes) -> None:
    try:
        item = orjson.loads(line)
    except orjson.JSONDecodeError:
        item = None
    version = item.get("curator_audit_bundle") if isinstance(item, dict) else None
    if version != VERSION:
        found = "no bundle header" if version is None else f"version {version!r}"
        raise BundleError(f"line 1: not a curator audit bundle of version {VERSION} ({found})")


def _message(item: dict[str, Any], number: int) -> Message:
    # The body as orjson writes it: the store's bytes (orjson wrote those too), checked.
    body = orjson.dumps(item["body"])
    digest = _hex(item["m"], number, one=True)
    if message_digest(body) != digest:
        raise BundleError(f"line {number}: message {item['m']} does not match its digest")
    return Message(digest, body)


def _record(item: dict[str, Any], number: int) -> Record:
    time = item.get("t")
    if not isinstance(time, int | float) or isinstance(time, bool):
        raise BundleError(f"line {number}: a record needs its time `t` (seconds), got {time!r}")
    original = _hex(item.get("original"), number)
    curated = item.get("curated")
    return Record(
        float(time),
        orjson.dumps(item["fields"]),
        original,
        None if curated is None else _hex(curated, number),
    )


def _hex(value: object, number: int, *, one: bool = False) -> bytes:
    """Digests written in hex: exactly one, or any number of them concatenated."""
    try:
        if not isinstance(value, str):
            raise ValueError
        data = bytes.fromhex(value)
        if len(data) % DIGEST_SIZE or (one and len(data) != DIGEST_SIZE):
            raise ValueError
        return data
    except ValueError:
        raise BundleError(f"line {number}: expected digests in hex, got {value!r:.40}") from None
