"""The uncurated request's cached tokens, online: `policies.prefix_cache` per conversation.

`curator simulate` prices a whole export offline: each prompt's cached tokens are the
longest block prefix it shares with an earlier prompt. Here the same model runs as requests
arrive, over the prompts each conversation sent before curation, so the proxy can say what
the client would have paid without it. The same per-conversation slot keeps the
conversation's last turn (its prompts' block keys) for the cache-miss attribution
(`attribution`), counted in the same byte bound. Memory is bounded three times: at most
`max_conversations` conversations and `max_bytes` of prefix nodes in all (the least
recently used conversations go), and at most `max_nodes` nodes each (a conversation past
it starts over, as a provider's cache would have expired by then). By count alone, 600
requests of 9,999 one-character messages each (a conversation each) took a worker from
84 MB to 1.18 GB, for good.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from policies.breakpoint_cache import Edges
from policies.digests import ByIdentity
from policies.prefix_cache import PrefixCache, Prompt
from proxy.observability.usage.attribution import CacheMiss, Turn, attribute, turn_of
from proxy.priority import BOOKKEEPING_STEPS, let_the_loop_in, lower_thread_priority

log = logging.getLogger("curator.spend")

MAX_CONVERSATIONS = 4096
MAX_QUEUE = 10_000
MAX_MEMO = 1024
T = TypeVar("T")
MAX_NODES = 16_384
MAX_BYTES = 32 * 2**20
NODE_BYTES = 170
"""What one prefix node holds (measured with tracemalloc: ~116 bytes for its edge, ~50 for
the 16-byte block digest it keeps alive)."""


@dataclass(frozen=True, slots=True)
class Attributed:
    """One turn to attribute: its client and upstream prompts (the same object when
    curation changed nothing), each upstream block's client block index, the cached tokens
    the upstream reported."""

    client: Prompt
    upstream: Prompt
    origins: Sequence[int]
    reported: int | None
    tools: bool
    partition: str = ""
    """The client's `prompt_cache_key` (`cache_partition`)."""
    scale: float = 1.0
    """The upstream's count of the prompt it received per token of ours (`count_scale`)."""
    priced: bool = True
    """Whether the client prompt joins the prefix cache for its counterfactual reads (a
    passthrough's are the reported ones: it keeps no prefix nodes)."""


@dataclass(slots=True)
class _Trie:
    """Every block path this conversation's prompts took: (parent, block key) -> node, and
    the nodes a client's breakpoint wrote (`policies.breakpoint_cache`)."""

    edges: Edges = field(default_factory=dict)
    written: set[int] = field(default_factory=set)


@dataclass(slots=True)
class _Slot:
    """One conversation: a prefix cache per model, and its last turn (`attribution`)."""

    tries: dict[tuple[str, str], _Trie] = field(default_factory=dict)
    """By (model, prompt_cache_key): providers cache per model (a switch of model starts
    from nothing), and distinct keys share no cache."""
    last: Turn | None = None

    @property
    def bytes(self) -> int:
        nodes = sum(len(trie.edges) for trie in self.tries.values())
        return nodes * NODE_BYTES + (self.last.bytes if self.last is not None else 0)


class Counterfactuals:
    """Per-conversation prefix caches of uncurated prompts, and each conversation's last
    turn for the cache-miss attribution, bounded in memory. Thread-safe."""

    def __init__(
        self,
        cache: PrefixCache | None = None,
        *,
        max_conversations: int = MAX_CONVERSATIONS,
        max_nodes: int = MAX_NODES,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        if max_conversations < 1 or max_nodes < 1 or max_bytes < 1:
            raise ValueError("max_conversations, max_nodes and max_bytes must be >= 1")
        self.cache = cache or PrefixCache()
        self.max_conversations = max_conversations
        self.max_nodes = max_nodes
        self.max_bytes = max_bytes
        self._conversations: OrderedDict[str, _Slot] = OrderedDict()
        self._bytes = 0
        """What every conversation kept holds (`_Slot.bytes`)."""
        self._lock = threading.Lock()
        self._memo: dict[tuple[object, ...], Any] = {}
        """Per-model facts and per-tool-list counts, asked for on every request."""
        self.tool_keys = ByIdentity[bytes]()
        """The digests of the tools lists seen recently (a shared list is hashed once)."""

    def memo(self, key: tuple[object, ...], compute: Callable[[], T]) -> T:
        """`compute()`, remembered under `key` (at most `MAX_MEMO` keys, then forgotten)."""
        try:
            value: T = self._memo[key]
        except KeyError:
            if len(self._memo) >= MAX_MEMO:
                self._memo.clear()
            value = self._memo[key] = compute()
        return value

    def __len__(self) -> int:
        return len(self._conversations)

    @property
    def bytes(self) -> int:
        """What the conversations kept hold: `NODE_BYTES` a prefix node, `KEY_BYTES` a
        remembered block key."""
        return self._bytes

    def cached_tokens(
        self, conversation: str, model: str, prompt: Prompt, partition: str = ""
    ) -> int:
        """The tokens of `prompt` a prefix cache would bill as cached, given the prompts
        this conversation sent `model` before under the same `partition` (the client's
        `prompt_cache_key`: distinct keys share no cache); `prompt` is remembered for the
        next ones."""
        with self._lock:
            slot = self._take(conversation)
            cached = self._add(slot, (model, partition), prompt)
            self._put(conversation, slot)
            return cached

    def attribute(self, conversation: str, model: str, turn: Attributed) -> tuple[int, CacheMiss]:
        """`cached_tokens` of the turn's client prompt, and its cache-miss attribution
        against the conversation's last turn, which it then becomes."""
        cache = self.cache
        now = turn_of(
            model, turn.client, turn.upstream, turn.tools, turn.partition, cache.min_tokens
        )
        with self._lock:
            slot = self._take(conversation)
            cached = self._add(slot, (model, turn.partition), turn.client) if turn.priced else 0
            found = attribute(slot.last, now, turn.origins, turn.reported, cache, turn.scale)
            slot.last = now
            self._put(conversation, slot)
            return cached, found

    def _take(self, conversation: str) -> _Slot:
        slot = self._conversations.pop(conversation, None)
        if slot is None:
            return _Slot()
        self._bytes -= slot.bytes
        return slot

    def _add(self, slot: _Slot, where: tuple[str, str], prompt: Prompt) -> int:
        """`prompt`'s cached tokens in the slot's cache for (model, prompt_cache_key)."""
        trie = slot.tries.get(where)
        if trie is None or len(trie.edges) + len(prompt.blocks) > self.max_nodes:
            trie = slot.tries[where] = _Trie()  # past its bound: starts over, as if expired
        return self.cache.cached(trie.edges, trie.written, prompt)

    def _put(self, conversation: str, slot: _Slot) -> None:
        """Keep `slot` as the most recently used; forget the least recently used past the
        bounds."""
        kept = self._conversations
        kept[conversation] = slot
        self._bytes += slot.bytes
        while kept and (len(kept) > self.max_conversations or self._bytes > self.max_bytes):
            self._bytes -= kept.popitem(last=False)[1].bytes


def _STOP() -> None:
    """Queued by `SpendThread.close`: the thread ends when it reaches it."""


class SpendThread:
    """Runs jobs in the order they were submitted, in one daemon thread started on first use
    (so after a worker's fork). A full queue drops the job and counts it: the proxy never
    waits for its spend figures."""

    def __init__(self, max_queue: int = MAX_QUEUE, name: str = "curator-spend") -> None:
        self._queue: queue.Queue[Callable[[], None]] = queue.Queue(max_queue)
        self._name = name
        self._thread: threading.Thread | None = None
        self._carrier: Callable[[Callable[[], None]], bool] | None = None
        self.dropped = 0

    def share(self, carrier: Callable[[Callable[[], None]], bool]) -> None:
        """Offer jobs to `carrier` first (the audit writer's `run_soon`, which runs them in
        order with the records whose counterfactual it computes anyway): one background
        thread wakes per exchange instead of two. Jobs it refuses run here."""
        self._carrier = carrier

    def submit(self, job: Callable[[], None]) -> None:
        if self._carrier is not None and self._carrier(job):
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            self.dropped += 1

    def join(self, timeout_s: float) -> bool:
        """Wait until every job submitted so far has run, here and in the carrier (tests);
        False on timeout."""
        here, carried = threading.Event(), threading.Event()
        if self._carrier is None or not self._carrier(carried.set):
            carried.set()
        if self._thread is None:
            here.set()
        else:
            self._queue.put(here.set)
        return here.wait(timeout_s) and carried.wait(timeout_s)

    def close(self) -> None:
        """Stop the thread once the jobs queued before it have run (it never blocks)."""
        if self._thread is not None:
            with contextlib.suppress(queue.Full):
                self._queue.put_nowait(_STOP)
            self._thread = None

    def _run(self) -> None:
        lower_thread_priority(BOOKKEEPING_STEPS)
        while True:
            job = self._queue.get()
            if job is _STOP:
                return
            try:
                job()
            except Exception:  # a bug in one figure must not stop the others
                log.exception("spend job failed")
            del job  # idle, the thread holds nothing of the last exchange
            let_the_loop_in()  # between jobs
