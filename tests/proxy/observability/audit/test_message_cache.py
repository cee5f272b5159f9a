"""The audit writer's cache of redacted messages: LRU order, its byte budget and the
quarter-budget cap on one entry, body-less entries held slim, and the digests that key and
address stored messages."""

from __future__ import annotations

import gc
import hashlib

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.observability.audit.message_cache import (
    ENTRY_BYTES,
    SLIM_ENTRY_BYTES,
    MessageCache,
    StoredMessage,
    message_digest,
    raw_digest,
    stored_of,
)


def stored(size: int, fill: bytes = b"x") -> StoredMessage:
    data = fill * size
    return StoredMessage(message_digest(data), data)


def cost(size: int) -> int:
    """What an entry with a body of `size` bytes counts against the budget."""
    return ENTRY_BYTES + size


def key(n: int) -> bytes:
    return n.to_bytes(16, "big")


def held_bytes(cache: MessageCache) -> int:
    held = [stored_of(entry).data for entry in cache.items.values()]
    return sum(SLIM_ENTRY_BYTES if data is None else cost(len(data)) for data in held)


def test_a_miss_is_none_and_a_hit_is_what_was_put() -> None:
    cache = MessageCache(10_000)
    value = stored(10, b"[REDACTED:x]")
    assert cache.get(key(1)) is None
    cache.put(key(1), value)
    hit = cache.get(key(1))
    assert hit is not None
    assert (hit.digest, hit.data, hit.redacted) == (value.digest, value.data, True)
    cache.put(key(2), value.without_body())
    left_out = cache.get(key(2))
    assert left_out is not None
    assert (left_out.digest, left_out.data, left_out.redacted) == (value.digest, None, True)
    assert cache.get(key(3)) is None
    assert cache.size == cost(120) + SLIM_ENTRY_BYTES


def test_the_garbage_collector_need_not_walk_the_entries() -> None:
    cache = MessageCache(10_000)
    cache.put(key(1), stored(10))
    cache.put(key(2), stored(10).without_body())
    gc.collect()  # untracks tuples of bytes and bools, as any collection does
    assert not any(gc.is_tracked(entry) for entry in cache.items.values())
    assert isinstance(cache.items[key(2)], bytes)  # without a body: one object, not two


def test_an_entry_without_a_body_counts_its_slim_overhead_only() -> None:
    cache = MessageCache(10_000)
    cache.put(key(1), stored(1000).without_body())
    cache.put(key(2), stored(0))  # an empty body is a body
    assert cache.size == SLIM_ENTRY_BYTES + ENTRY_BYTES


def test_an_entry_of_exactly_a_quarter_of_the_budget_is_kept_one_byte_more_is_not() -> None:
    cache = MessageCache(4 * cost(100))
    cache.put(key(1), stored(100))
    cache.put(key(2), stored(101))
    assert cache.get(key(1)) is not None
    assert cache.get(key(2)) is None
    assert (cache.size, list(cache.items)) == (cost(100), [key(1)])


def test_the_quarter_rounds_down() -> None:
    cache = MessageCache(4 * cost(100) + 3)  # a quarter of it rounds down to cost(100)
    cache.put(key(1), stored(101))
    assert cache.get(key(1)) is None
    assert cache.size == 0


def test_a_zero_budget_keeps_nothing() -> None:
    cache = MessageCache(0)  # audit.cache_bytes: 0
    cache.put(key(1), stored(1))
    cache.put(key(2), stored(0).without_body())
    assert cache.items == {}
    assert cache.size == 0


def test_filling_exactly_to_the_budget_evicts_nothing() -> None:
    cache = MessageCache(4 * cost(25))
    for n in range(4):
        cache.put(key(n), stored(25))
    assert cache.size == 4 * cost(25)
    assert list(cache.items) == [key(0), key(1), key(2), key(3)]


def test_one_entry_past_the_budget_evicts_the_least_recently_put() -> None:
    cache = MessageCache(4 * cost(25))
    for n in range(4):
        cache.put(key(n), stored(25))
    cache.put(key(4), stored(1))
    assert list(cache.items) == [key(1), key(2), key(3), key(4)]
    assert cache.size == 3 * cost(25) + cost(1)


def test_a_hit_moves_the_entry_to_the_young_end() -> None:
    cache = MessageCache(4 * cost(25))
    for n in range(4):
        cache.put(key(n), stored(25))
    assert cache.get(key(0)) is not None  # now the most recently used
    cache.put(key(4), stored(25))
    assert list(cache.items) == [key(2), key(3), key(0), key(4)]
    assert cache.get(key(1)) is None


def test_a_miss_does_not_reorder() -> None:
    cache = MessageCache(4 * cost(25))
    cache.put(key(0), stored(25))
    cache.put(key(1), stored(25))
    assert cache.get(key(9)) is None
    assert list(cache.items) == [key(0), key(1)]


def test_a_big_entry_evicts_as_many_old_ones_as_it_needs() -> None:
    cache = MessageCache(10 * cost(10))
    for n in range(10):
        cache.put(key(n), stored(10))
    cache.put(key(10), stored(400))
    # It needs more than two entries' room and at most three's: three go, not more.
    assert 2 * cost(10) < cost(400) <= 3 * cost(10)
    assert list(cache.items) == [key(n) for n in range(3, 11)]
    assert cache.size == 7 * cost(10) + cost(400)


def test_message_digest_is_a_16_byte_blake2b() -> None:
    data = b'{"content":"hi","role":"user"}'
    assert message_digest(data) == hashlib.blake2b(data, digest_size=16).digest()
    assert len(message_digest(b"")) == 16
    assert message_digest(b"a") != message_digest(b"b")


def test_raw_digest_ignores_key_order_but_not_values() -> None:
    a = {"role": "user", "content": "hi", "name": "x"}
    b = {"name": "x", "content": "hi", "role": "user"}
    assert raw_digest(a) == raw_digest(b)
    assert raw_digest(a) != raw_digest({**a, "content": "hi "})
    assert raw_digest(a) == message_digest(b'{"content":"hi","name":"x","role":"user"}')


def test_raw_digest_sorts_nested_keys_and_keys_lists_too() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"b": 1, "a": 2}}}]
    same = [{"function": {"parameters": {"a": 2, "b": 1}, "name": "f"}, "type": "function"}]
    assert raw_digest(tools) == raw_digest(same)
    assert raw_digest(tools) == message_digest(orjson.dumps(same, option=orjson.OPT_SORT_KEYS))
    # A list's order is content, not presentation.
    assert raw_digest([1, 2]) != raw_digest([2, 1])


# -- properties ---------------------------------------------------------------------------

operations = st.lists(
    # (key, size of its message, left out of the entry, redacted)
    st.tuples(st.integers(0, 15), st.integers(0, 600), st.booleans(), st.booleans()),
    max_size=60,
)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 6000), operations)
def test_used_as_the_builder_uses_it_the_cache_never_holds_more_than_its_budget(
    budget: int, ops: list[tuple[int, int, bool, bool]]
) -> None:
    """The builder puts a key only after `get` missed it: then `size` is exactly what the
    entries hold, never more than the budget, and a key just put (if small enough) is there,
    giving back what was put, a body or not, its flag either way."""
    cache = MessageCache(budget)
    for k, size, slim, redacted in ops:
        if cache.get(key(k)) is not None:
            continue
        value = stored(size // 12, b"[REDACTED:x]") if redacted else stored(size)
        if slim:
            value = value.without_body()
        cache.put(key(k), value)
        assert cache.size == held_bytes(cache) <= budget
        fits = (SLIM_ENTRY_BYTES if slim else cost(len(value.data or b""))) <= budget // 4
        if fits:
            held = stored_of(cache.items[key(k)])
            assert (held.digest, held.data, held.redacted) == (
                value.digest,
                value.data,
                value.redacted,
            )
            assert next(reversed(cache.items)) == key(k)
        else:
            assert key(k) not in cache.items


def test_putting_a_held_key_again_replaces_its_size() -> None:
    cache = MessageCache(4 * cost(25))
    for _ in range(4):
        cache.put(key(1), stored(25))
    assert cache.size == held_bytes(cache) == cost(25)
    cache.put(key(2), stored(25))
    assert cache.get(key(1)) is not None  # nothing was evicted for phantom bytes


def test_a_stored_message_knows_whether_redaction_took_something_out() -> None:
    clean = orjson.dumps({"role": "user", "content": "nothing to hide"})
    marked = orjson.dumps({"role": "user", "content": "key=[REDACTED:openai_key]"})
    assert not StoredMessage(message_digest(clean), clean).redacted
    assert StoredMessage(message_digest(marked), marked).redacted
