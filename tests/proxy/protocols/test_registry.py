"""protocols/__init__.py: the registry finds a protocol by method and path, nothing else."""

from __future__ import annotations

import pytest

from proxy.protocols import PROTOCOLS, protocol_for
from proxy.protocols.chat import CHAT


def test_chat_completions_is_registered() -> None:
    assert CHAT in PROTOCOLS
    assert protocol_for("POST", "/v1/chat/completions") is CHAT


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/v1/chat/completions"), ("POST", "/v1/chat/completions/"), ("POST", "/v1/models")],
)
def test_other_requests_are_only_relayed(method: str, path: str) -> None:
    assert protocol_for(method, path) is None


def test_protocol_names_and_routes_are_unique() -> None:
    assert len({p.name for p in PROTOCOLS}) == len(PROTOCOLS)
    assert len({(p.method, p.path) for p in PROTOCOLS}) == len(PROTOCOLS)
