"""Cache keys name exactly one message; the bounded cache forgets the oldest first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from policies.digests import ByIdentity, Lru, message_key

SPACE = b"m\0o200k_base\0"


def test_equal_messages_share_a_key_whatever_their_key_order() -> None:
    a = {"role": "tool", "tool_call_id": "c1", "content": "out"}
    b = {"content": "out", "tool_call_id": "c1", "role": "tool"}
    assert message_key(SPACE, a) == message_key(SPACE, b)
    assert len(message_key(SPACE, a)) == 16


DIFFERENT: list[dict[str, Any]] = [
    {"role": "user", "content": "a"},
    {"role": "user", "content": "b"},
    {"role": "user", "content": ["a"]},
    {"role": "user", "content": [{"type": "text", "text": "a"}]},
    {"role": "user", "content": ""},
    {"role": "user"},
    {"role": "user", "content": None},
    {"role": "user", "name": "x", "content": "a"},
    {"role": "assistant", "content": "a"},
    # A NUL in a value cannot pass for the separator between the fields and the content.
    {"role": "user\0", "content": "a"},
    {"role": "user", "content": "\0a"},
    {"role": "user", "content": "a\ud800"},  # a lone surrogate still has bytes of its own
    {"role": "user", "content": "a", "extra": {1, 2}},  # not JSON: keyed by its repr
    {"role": "user", "content": "a", "extra": {1, 3}},
]


def test_different_messages_get_different_keys() -> None:
    keys = [message_key(SPACE, m) for m in DIFFERENT]
    assert len(set(keys)) == len(keys)


def test_the_namespace_separates_encodings() -> None:
    msg = {"role": "user", "content": "a"}
    assert message_key(SPACE, msg) != message_key(b"m\0cl100k_base\0", msg)


@pytest.mark.parametrize("capacity", [0, 1, 3])
def test_the_cache_forgets_the_least_recently_used(capacity: int) -> None:
    lru = Lru[int](capacity)
    for i in range(4):
        lru.put(bytes([i]), i)
    assert len(lru) == capacity
    kept = [i for i in range(4) if lru.get(bytes([i])) is not None]
    assert kept == list(range(4 - capacity, 4))


def test_reading_an_entry_keeps_it() -> None:
    lru = Lru[int](2)
    lru.put(b"a", 1)
    lru.put(b"b", 2)
    assert lru.get(b"a") == 1
    lru.put_many([(b"c", 3)])
    assert lru.get_many([b"a", b"b", b"c"]) == [1, None, 3]


def test_a_missing_value_is_computed_once_and_kept() -> None:
    lru = Lru[int](2)
    calls: list[bytes] = []

    def compute(key: bytes) -> int:
        calls.append(key)
        return len(calls)

    assert lru.get_or_compute(b"a", lambda: compute(b"a")) == 1
    assert lru.get_or_compute(b"a", lambda: compute(b"a")) == 1
    assert lru.get_or_compute(b"b", lambda: compute(b"b")) == 2
    assert calls == [b"a", b"b"]
    assert lru.get_many([b"a", b"b"]) == [1, 2]


def test_by_identity_computes_once_per_object_and_tag_and_forgets_the_oldest() -> None:
    memo = ByIdentity[int](size=2)
    calls: list[str] = []

    def compute(name: str) -> Callable[[], int]:
        return lambda: calls.append(name) or len(calls)

    first, equal, other = ["a"], ["a"], ["b"]
    assert memo.get_or_compute(first, b"x", compute("first")) == 1
    assert memo.get_or_compute(first, b"x", compute("again")) == 1  # the same object
    assert memo.get_or_compute(equal, b"x", compute("equal")) == 2  # equal is not the same
    assert memo.get_or_compute(first, b"y", compute("tag")) == 3  # another tag
    assert calls == ["first", "equal", "tag"]
    memo.get_or_compute(other, b"x", compute("other"))  # past size 2: the oldest went
    assert memo.get_or_compute(first, b"x", compute("evicted")) == 5
    assert calls[-1] == "evicted"


def test_by_identity_keeps_its_objects_so_an_id_is_never_another_objects() -> None:
    memo = ByIdentity[str]()
    gone = ["x"]
    memo.get_or_compute(gone, b"", lambda: "x")
    del gone  # the memo still holds it: no new object can take its id
    fresh = [["y"] for _ in range(50)]
    assert all(memo.get_or_compute(o, b"", lambda o=o: o[0]) == "y" for o in fresh)
