"""The online counterfactual: conversation keys, and prefix caching bounded in memory."""

from __future__ import annotations

from policies.prefix_cache import Block, PrefixCache, Prompt
from proxy.observability.usage.conversation import conversation_key
from proxy.observability.usage.counterfactual import Counterfactuals

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
    assert history.cached_tokens("a", prompt(1500, 10)) == 0, "nothing seen yet"
    # the same first block (1,500 tokens) again: 1,024 + 3 * 128 cached
    assert history.cached_tokens("a", prompt(1500, 20)) == 1408
    assert history.cached_tokens("b", prompt(1500, 20)) == 0, "another conversation"


def test_memory_is_bounded() -> None:
    history = Counterfactuals(max_conversations=2, max_nodes=5)
    history.cached_tokens("a", prompt(2000))
    history.cached_tokens("b", prompt(2000))
    history.cached_tokens("c", prompt(2000))
    assert len(history) == 2
    assert history.cached_tokens("a", prompt(2000)) == 0, "a was the least recently used"
    history.cached_tokens("c", prompt(1, 1, 1, 1, 1))  # past max_nodes: c starts over
    assert history.cached_tokens("c", prompt(2000)) == 0
