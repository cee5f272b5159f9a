"""Conversations by history extension (`audit.threads`)."""

from __future__ import annotations

import hashlib

import pytest

from proxy.observability.audit.threads import Threads


def d(*names: str) -> list[bytes]:
    return [hashlib.blake2b(n.encode(), digest_size=16).digest() for n in names]


def test_a_history_that_extends_the_latest_is_the_same_conversation() -> None:
    threads = Threads()
    first = threads.assign(d("sys", "task"), 2, "head", "r1")
    assert threads.assign(d("sys", "task", "a1", "t1"), 2, "head", "r2") == first
    assert threads.assign(d("sys", "task", "a1", "t1", "a2", "t2"), 2, "head", "r3") == first


def test_a_retry_of_the_same_history_is_the_same_conversation() -> None:
    threads = Threads()
    first = threads.assign(d("sys", "task", "a1"), 2, "head", "r1")
    assert threads.assign(d("sys", "task", "a1"), 2, "head", "r2") == first


def test_two_runs_of_one_task_are_two_conversations() -> None:
    threads = Threads()
    run1 = [threads.assign(d("sys", "task", *(f"a{i}" for i in range(n))), 2, "h", f"1-{n}")
            for n in range(0, 5)]  # fmt: skip
    run2 = [threads.assign(d("sys", "task", *(f"b{i}" for i in range(n))), 2, "h", f"2-{n}")
            for n in range(0, 5)]  # fmt: skip
    assert len(set(run1)) == 1
    assert len(set(run2)) == 1
    assert run1[0] != run2[0]


def test_a_history_that_drops_what_was_sent_starts_a_new_conversation() -> None:
    threads = Threads()
    first = threads.assign(d("sys", "task", "a1", "t1"), 2, "h", "r1")
    assert threads.assign(d("sys", "task", "summary"), 2, "h", "r2") != first


def test_a_transient_last_message_left_out_next_turn_is_the_same_conversation() -> None:
    threads = Threads()
    first = threads.assign(d("sys", "task", "a1", "t1", "continue"), 2, "h", "r1")
    assert threads.assign(d("sys", "task", "a1", "t1", "a2", "t2"), 2, "h", "r2") == first


def test_the_first_user_message_is_never_transient() -> None:
    threads = Threads()
    first = threads.assign(d("sys", "task"), 2, "h", "r1")
    threads.assign(d("sys", "task", "a1"), 2, "h", "r2")
    assert threads.assign(d("sys", "task"), 2, "h", "r3") != first  # a second run


def test_interleaved_conversations_keep_their_own_ids() -> None:
    threads = Threads()
    x = threads.assign(d("sys", "x"), 2, "hx", "r1")
    y = threads.assign(d("sys", "y"), 2, "hy", "r2")
    assert threads.assign(d("sys", "x", "ax"), 2, "hx", "r3") == x
    assert threads.assign(d("sys", "y", "ay"), 2, "hy", "r4") == y
    assert len(threads) == 2


def test_the_longest_extended_history_wins() -> None:
    threads = Threads()
    short = threads.assign(d("s", "u"), 2, "h", "r1")
    threads.assign(d("s", "u", "a", "b", "c"), 2, "h", "r2")  # extends `short`
    other = threads.assign(d("s", "u", "a"), 2, "h", "r3")  # does not extend the latest: new
    assert other != short
    assert threads.assign(d("s", "u", "a", "b", "c", "d"), 2, "h", "r4") == short
    assert threads.assign(d("s", "u", "a", "x"), 2, "h", "r5") == other


def test_the_oldest_conversations_are_forgotten_past_the_limit() -> None:
    threads = Threads(limit=2)
    a = threads.assign(d("a"), 2, "h", "r1")
    threads.assign(d("b"), 2, "h", "r2")
    threads.assign(d("c"), 2, "h", "r3")
    assert len(threads) == 2
    assert threads.assign(d("a", "more"), 2, "h", "r4") != a


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="limit"):
        Threads(limit=0)
