"""The uncurated request's cached tokens, online: `policies.prefix_cache` per conversation.

`curator simulate` prices a whole export offline: each prompt's cached tokens are the
longest block prefix it shares with an earlier prompt. Here the same model runs as requests
arrive, over the prompts each conversation sent before curation, so the proxy can say what
the client would have paid without it. Memory is bounded twice: at most `max_conversations`
conversations (the least recently used goes), and at most `max_nodes` prefix nodes each
(a conversation past it starts over, as a provider's cache would have expired by then).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from policies.prefix_cache import PrefixCache, Prompt

MAX_CONVERSATIONS = 4096
MAX_NODES = 16_384


@dataclass(slots=True)
class _Trie:
    """Every block path this conversation's prompts took: (parent, block key) -> node."""

    edges: dict[tuple[int, bytes], int] = field(default_factory=dict)

    def add(self, prompt: Prompt) -> int:
        """Insert `prompt`; the tokens of its longest prefix seen before."""
        node, shared, matching = 0, 0, True
        for block in prompt.blocks:
            child = self.edges.get((node, block.key)) if matching else None
            if child is None:
                matching = False
                child = self.edges[(node, block.key)] = len(self.edges) + 1
            else:
                shared += block.tokens
            node = child
        return shared


class Counterfactuals:
    """Per-conversation prefix caches of uncurated prompts, bounded in memory. Thread-safe."""

    def __init__(
        self,
        cache: PrefixCache | None = None,
        *,
        max_conversations: int = MAX_CONVERSATIONS,
        max_nodes: int = MAX_NODES,
    ) -> None:
        if max_conversations < 1 or max_nodes < 1:
            raise ValueError("max_conversations and max_nodes must be >= 1")
        self.cache = cache or PrefixCache()
        self.max_conversations = max_conversations
        self.max_nodes = max_nodes
        self._conversations: OrderedDict[str, _Trie] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._conversations)

    def cached_tokens(self, conversation: str, prompt: Prompt) -> int:
        """The tokens of `prompt` a prefix cache would bill as cached, given the prompts
        this conversation sent before; `prompt` is remembered for the next ones."""
        with self._lock:
            trie = self._conversations.get(conversation)
            if trie is None or len(trie.edges) + len(prompt.blocks) > self.max_nodes:
                trie = _Trie()
            self._conversations[conversation] = trie
            self._conversations.move_to_end(conversation)
            while len(self._conversations) > self.max_conversations:
                self._conversations.popitem(last=False)
            return self.cache.cacheable(trie.add(prompt))
