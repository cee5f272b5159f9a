"""What the audit writer stamps on every record it builds: the time as ISO-8601, and the
client's key fingerprint. Both are the same for many records in a row (a second's worth of
requests, one agent's key), so the writer's `Stamps` remembers the last ones."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

FINGERPRINTS_MAX = 256
"""Distinct client credentials remembered (the writer thread's own; bounded)."""


def key_fingerprint(authorization: str | None) -> str | None:
    """`sha256:` + 12 hex digits of the bearer token, so clients can be told apart."""
    if not authorization or not authorization.strip():
        return None
    value = authorization.strip()
    scheme, _, token = value.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        value = token.strip()
    return "sha256:" + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def iso_time(epoch: float) -> str:
    stamp = datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def parse_iso(stamp: str) -> float:
    """Seconds since the epoch for an ISO-8601 time; one without a zone is taken as UTC."""
    when = datetime.fromisoformat(stamp.replace("Z", "+00:00").replace("z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


class Stamps:
    """`iso_time` and `key_fingerprint`, remembering recent answers. One thread only."""

    __slots__ = ("_clients", "_second", "_stamp")

    def __init__(self) -> None:
        self._second = -1
        self._stamp = ""
        self._clients: dict[str | None, str | None] = {}

    def time(self, epoch: float) -> str:
        """`iso_time(epoch)`; the date and time of day are worked out once per second."""
        if epoch < 0:
            return iso_time(epoch)
        second = int(epoch)
        micros = round((epoch - second) * 1e6)  # as datetime rounds: half to even
        if micros >= 1_000_000:
            second, micros = second + 1, micros - 1_000_000
        if second != self._second:
            self._second, self._stamp = second, iso_time(second)[:-5]
        return f"{self._stamp}.{micros // 1000:03d}Z"

    def client(self, authorization: str | None) -> str | None:
        """`key_fingerprint(authorization)`."""
        if authorization in self._clients:
            return self._clients[authorization]
        if len(self._clients) >= FINGERPRINTS_MAX:
            self._clients.clear()
        found = self._clients[authorization] = key_fingerprint(authorization)
        return found
