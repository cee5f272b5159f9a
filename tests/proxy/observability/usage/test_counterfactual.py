"""The online counterfactual: conversation keys, and prefix caching bounded in memory."""

from __future__ import annotations

import os
import sys
import threading
import time
import tracemalloc
import weakref

import pytest

from policies.prefix_cache import Block, PrefixCache, Prompt
from proxy.observability.usage.conversation import conversation_key
from proxy.observability.usage.counterfactual import NODE_BYTES, Counterfactuals, SpendThread
from proxy.priority import BOOKKEEPING_STEPS, MAX_NICE

SYSTEM = {"role": "system", "content": "You are terse."}


def prompt(*sizes: int) -> Prompt:
    return Prompt(tuple(Block(bytes([i]), n) for i, n in enumerate(sizes)))


def test_conversation_key_is_the_session_else_pins_and_first_user() -> None:
    first = [SYSTEM, {"role": "user", "content": "fix the bug"}]
    later = [*first, {"role": "assistant", "content": "done"}, {"role": "user", "content": "?"}]
    other = [SYSTEM, {"role": "user", "content": "write docs"}]
    assert conversation_key(None, first) == conversation_key(None, later)
    assert conversation_key(None, first) != conversation_key(None, other)
    assert conversation_key(None, first).startswith("c-")
    assert conversation_key("run-42", first) == "run-42"
    assert conversation_key("x" * 500, first).startswith("s-")
    assert conversation_key("bad\nid", first).startswith("s-")


def test_cached_tokens_follow_the_prefix_model_per_conversation() -> None:
    history = Counterfactuals(PrefixCache())
    assert history.cached_tokens("a", "m", prompt(1500, 10)) == 0, "nothing seen yet"
    # the same first block (1,500 tokens) again: 1,024 + 3 * 128 cached
    assert history.cached_tokens("a", "m", prompt(1500, 20)) == 1408
    assert history.cached_tokens("b", "m", prompt(1500, 20)) == 0, "another conversation"


def test_a_model_switch_gets_no_credit_from_the_other_models_cache() -> None:
    history = Counterfactuals(PrefixCache())
    history.cached_tokens("a", "gpt-4o", prompt(9000, 10))
    assert history.cached_tokens("a", "gpt-4o-mini", prompt(9000, 20)) == 0, "another model"
    assert history.cached_tokens("a", "gpt-4o", prompt(9000, 30)) == 8960


def test_memory_is_bounded() -> None:
    history = Counterfactuals(max_conversations=2, max_nodes=5)
    history.cached_tokens("a", "m", prompt(2000))
    history.cached_tokens("b", "m", prompt(2000))
    history.cached_tokens("c", "m", prompt(2000))
    assert len(history) == 2
    assert history.cached_tokens("a", "m", prompt(2000)) == 0, "a was the least recently used"
    history.cached_tokens("c", "m", prompt(1, 1, 1, 1, 1))  # past max_nodes: c starts over
    assert history.cached_tokens("c", "m", prompt(2000)) == 0


def _digests(conversation: int, count: int) -> Prompt:
    """`count` one-token blocks with 16-byte keys of their own, as real digests are."""
    base = conversation << 32
    return Prompt(tuple(Block((base + i).to_bytes(16, "big"), 1) for i in range(count)))


def test_memory_is_bounded_in_bytes_across_conversations() -> None:
    # As the attack: each request a conversation of its own with 9,999 messages.
    history = Counterfactuals(max_bytes=2 * 2**20)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for conversation in range(24):
            history.cached_tokens(f"c{conversation}", "m", _digests(conversation, 9999))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert history.bytes <= history.max_bytes
    assert len(history) == history.max_bytes // (9999 * NODE_BYTES)  # the newest ones
    assert held < 2 * history.max_bytes, held  # by count alone: ~40 MB
    assert history.cached_tokens("c23", "m", _digests(23, 2000)) == 1920  # the newest is kept


def test_spend_thread_runs_jobs_in_order_and_drops_when_full() -> None:
    import threading

    from proxy.observability.usage.counterfactual import SpendThread

    done: list[int] = []
    thread = SpendThread()
    for i in range(50):
        thread.submit(lambda i=i: done.append(i))
    assert thread.join(5.0)
    assert done == list(range(50))

    started, gate = threading.Event(), threading.Event()
    full = SpendThread(max_queue=1)

    def hold() -> None:
        started.set()
        gate.wait(5.0)

    full.submit(hold)
    assert started.wait(5.0)  # the thread holds the gate job: the queue is empty
    full.submit(lambda: None)  # fills the one slot
    full.submit(lambda: None)  # dropped
    assert full.dropped == 1
    gate.set()
    assert any(full.join(0.1) for _ in range(50)), "the queue drains once the gate opens"


def test_spend_thread_stops_on_close_after_its_queued_jobs() -> None:
    from proxy.observability.usage.counterfactual import SpendThread

    done: list[int] = []
    spend = SpendThread()
    spend.submit(lambda: done.append(1))
    worker = spend._thread
    assert worker is not None
    spend.close()
    worker.join(5.0)
    assert not worker.is_alive()
    assert done == [1]


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread nice is Linux's")
def test_spend_jobs_run_below_the_event_loop_priority() -> None:
    spend = SpendThread()
    seen: list[int] = []
    spend.submit(lambda: seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id())))
    assert spend.join(5.0)
    base = os.getpriority(os.PRIO_PROCESS, 0)
    assert seen == [min(MAX_NICE, base + BOOKKEEPING_STEPS)]


def test_an_idle_spend_thread_holds_nothing_of_the_last_job() -> None:
    """A job holds its exchange's messages; the thread waiting for the next must not."""

    class Messages(list[dict[str, str]]):
        """A list that takes weak references."""

    messages = Messages([SYSTEM])
    gone = weakref.ref(messages)
    ran = threading.Event()
    thread = SpendThread()
    thread.submit(lambda held=messages: ran.set() if held else None)
    del messages
    assert ran.wait(5.0)
    deadline = time.monotonic() + 5.0
    while gone() is not None and time.monotonic() < deadline:
        time.sleep(0.01)  # no job comes after it: only the thread's own reference is left
    assert gone() is None
    assert thread.join(5.0)
