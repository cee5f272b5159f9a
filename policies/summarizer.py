"""summarizer: replaces the oldest part of a long conversation with a model-written summary.

Trigger. Nothing happens until the messages exceed `trigger_tokens`, or `trigger_ratio`
of the request's budget (0.8 when neither is set).

Span. Only non-pinned whole units older than the newest `keep_recent_turns` turns (and
never the newest unit) can be summarized. As in token_budget, the cut moves in large
steps: the only cut points are the first unit boundaries at or past each multiple of
`step = summarize_ratio * trigger` tokens, counted from the oldest candidate, plus the
last candidate boundary. The smallest cut after which the list fits under the trigger
(counting the summary at its ceiling, `max_summary_tokens`) is taken. A client resends its
whole history every turn, so the next turns pick the same cut, hash the same span, and
reuse the cached summary without a call. Pinned messages inside the span stay, in order,
ahead of the summary. A span must hold more tokens than a summary can take.

Call and cache. Summaries are cached under a digest of the span and the settings that
shape them (model, instructions, max_summary_tokens). When the cut moves on, the summary
cached for the largest earlier cut point is folded with only the new messages, so each
call reads about one step of transcript. A span that starts with a summary message (a
curated list fed back in) is folded the same way. The prompt is built by
`summary_prompt`, which treats the transcript as data.

Placement. One message replaces the span, right where the span ends, and its text starts
with `SUMMARY_PREFIX`. Its role is `assistant`:
- never `user`: a summary is not something the user said, and instructions smuggled into
  it would be obeyed with the user's authority;
- not `system`: system messages are pinned by default, so a system summary could never be
  folded or dropped again and each round would stack one more; system text is obeyed
  above everything else, which would promote whatever injected text survived
  summarizing; and several OpenAI-compatible servers' chat templates (Mistral, Gemma)
  reject a system message that is not the first.
As an assistant message it reads as the model's own notes on what happened: context, not
orders. It may follow another assistant message; OpenAI and most servers accept that.

Fail-open. If the call fails, times out (`timeout_s`) or returns nothing, the input comes
back unchanged and the failure is counted in `ctx.services.stats`; the token_budget that
follows in the chain then does its job. A request never fails because of the summarizer.

Idempotent. A curated list fits under the trigger (the summary is cut to its ceiling), so
curating it again does nothing; when even the largest cut cannot get under the trigger,
the next pass finds only the summary itself to summarize, and leaves it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from policies import params
from policies.base import Action, AsyncOnlyError, CurationContext, CuratorOutput
from policies.errors import ParamError
from policies.invariants import is_summary
from policies.messages import Message, Unit, turn_starts, units
from policies.summary_cache import MEMORY, anchored_cuts, cache_spec, lookup, span_keys, store
from policies.summary_io import Completion, Services, SummaryRequest
from policies.summary_prompt import (
    DEFAULT_INSTRUCTIONS,
    build_prompt,
    fit_summary,
    nonce_for,
    prior_text,
    summary_ceiling,
)
from policies.tokens import REPLY_PRIMING

log = logging.getLogger("curator.summarizer")

DEFAULT_TRIGGER_RATIO = 0.8
KEY_VERSION = b"summary-v1"


@dataclass(frozen=True, slots=True)
class SpanPlan:
    """What to summarize: the first `cut` candidate units, and the cache keys involved."""

    candidates: list[Unit]
    cut: int
    key: str
    earlier: list[tuple[int, str]]
    """(cut, key) of the cut points before `cut`, newest first: where a fold can start."""
    span_tokens: int


@dataclass(frozen=True, slots=True)
class Summarizer:
    """Replaces the oldest whole units with one summary message once over the trigger."""

    name: ClassVar[str] = "summarizer"

    upstream: str
    model: str
    trigger_tokens: int | None = None
    trigger_ratio: float | None = None
    summarize_ratio: float = 0.5
    keep_recent_turns: int = 0
    max_summary_tokens: int = 1024
    timeout_s: float = 30.0
    prompt: str | None = None
    cache: str = MEMORY

    def __post_init__(self) -> None:
        _text("upstream", self.upstream)
        _text("model", self.model)
        if self.trigger_tokens is not None:
            params.integer("trigger_tokens", self.trigger_tokens, minimum=1)
        if self.trigger_ratio is not None:
            ratio = params.ratio("trigger_ratio", self.trigger_ratio, allow_zero=False)
            object.__setattr__(self, "trigger_ratio", ratio)
            if self.trigger_tokens is not None:
                raise ParamError("trigger_ratio", "set trigger_tokens or trigger_ratio, not both")
        ratio = params.ratio("summarize_ratio", self.summarize_ratio, allow_zero=False)
        object.__setattr__(self, "summarize_ratio", ratio)
        params.integer("keep_recent_turns", self.keep_recent_turns, minimum=0)
        params.integer("max_summary_tokens", self.max_summary_tokens, minimum=1)
        timeout = self.timeout_s
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise ParamError("timeout_s", f"must be a number, got {timeout!r}")
        if not math.isfinite(timeout) or timeout <= 0:
            raise ParamError("timeout_s", f"must be > 0, got {timeout}")
        object.__setattr__(self, "timeout_s", float(timeout))
        if self.prompt is not None:
            _text("prompt", self.prompt)
        cache_spec("cache", self.cache)

    def trigger(self, ctx: CurationContext) -> int:
        """Tokens above which the summarizer acts, never more than the request's budget."""
        if self.trigger_tokens is not None:
            return min(self.trigger_tokens, ctx.budget)
        return int((self.trigger_ratio or DEFAULT_TRIGGER_RATIO) * ctx.budget)

    def curate(
        self,
        messages: Sequence[Message],  # noqa: ARG002 - the Curator protocol's signature
        ctx: CurationContext,  # noqa: ARG002
    ) -> CuratorOutput:
        """Always raises `AsyncOnlyError`: summarizing awaits a model (use `acurate`)."""
        raise AsyncOnlyError((self.name,))

    async def acurate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        unchanged = CuratorOutput(list(messages))
        plan = self.plan(messages, ctx)
        if plan is None:
            return unchanged
        services = ctx.services
        if services is None:
            log.warning("summarizer: no services to call %s with; not summarizing", self.model)
            return unchanged
        found = await self._summary(messages, plan, ctx, services)
        if found is None:
            return unchanged
        text, how = found
        summary = fit_summary(text, self.max_summary_tokens, ctx.counter, ctx.model)
        span = [i for u in plan.candidates[: plan.cut] for i in u.indexes()]
        stop = plan.candidates[plan.cut - 1].stop
        gone = set(span)
        out = [m for i, m in enumerate(messages[:stop]) if i not in gone]
        out += [summary, *messages[stop:]]
        size = ctx.count(summary)
        saved = plan.span_tokens - size
        services.stats.tokens_saved += saved
        reason = (
            f"summarized {len(span)} messages ({plan.span_tokens:,} tokens) "
            f"into {size:,} tokens; {how}"
        )
        return CuratorOutput(out, (Action(self.name, "summarize", tuple(span), saved, reason),))

    def plan(self, messages: Sequence[Message], ctx: CurationContext) -> SpanPlan | None:
        """The span to summarize, or None when nothing should be (see the module docstring)."""
        sizes = ctx.count_each(messages)
        total, trigger = sum(sizes) + REPLY_PRIMING, self.trigger(ctx)
        if total <= trigger or len(messages) < 2:
            return None
        pinned = ctx.pinned(messages)
        every = units(messages)
        tail = self._tail_start(messages, every[-1].start)
        candidates = [u for u in every if u.stop <= tail and pinned.isdisjoint(u.indexes())]
        cumulative = list(itertools.accumulate(sum(sizes[u.start : u.stop]) for u in candidates))
        ceiling = summary_ceiling(self.max_summary_tokens, ctx.counter, ctx.model)
        # Only the summary itself, or a span no larger than a summary, is not worth a call.
        first = 2 if candidates and is_summary(messages[candidates[0].start]) else 1
        cuts = [
            c
            for c in anchored_cuts(cumulative, max(1, math.ceil(self.summarize_ratio * trigger)))
            if c >= first and cumulative[c - 1] > ceiling
        ]
        if not cuts:
            return None
        cut = next((c for c in cuts if total - cumulative[c - 1] + ceiling <= trigger), cuts[-1])
        earlier = [c for c in cuts if c < cut]
        keys = self._keys(messages, candidates, [*earlier, cut])
        return SpanPlan(
            candidates=candidates,
            cut=cut,
            key=keys[cut],
            earlier=[(c, keys[c]) for c in reversed(earlier)],
            span_tokens=cumulative[cut - 1],
        )

    def _tail_start(self, messages: Sequence[Message], last: int) -> int:
        """Where the messages that are never summarized begin (`last`: the newest unit's)."""
        k = self.keep_recent_turns
        if k == 0:
            return last
        starts = turn_starts(messages)
        return 0 if len(starts) < k else min(last, starts[-k])

    def _keys(
        self, messages: Sequence[Message], candidates: list[Unit], cuts: list[int]
    ) -> dict[int, str]:
        """Cache key of each span `candidates[:cut]` (see `summary_cache.span_keys`)."""
        settings = [KEY_VERSION, self.model.encode(), str(self.max_summary_tokens).encode()]
        flat = [messages[i] for u in candidates[: max(cuts)] for i in u.indexes()]
        ends = list(itertools.accumulate(u.stop - u.start for u in candidates))
        keys = span_keys(
            b"\0".join([*settings, self._instructions().encode()]),
            flat,
            [ends[c - 1] for c in cuts],
        )
        return dict(zip(cuts, keys, strict=True))

    def _instructions(self) -> str:
        return self.prompt if self.prompt is not None else DEFAULT_INSTRUCTIONS

    async def _summary(
        self, messages: Sequence[Message], plan: SpanPlan, ctx: CurationContext, services: Services
    ) -> tuple[str, str] | None:
        """The summary text and how it was had; None if the call failed (fail-open)."""
        stats = services.stats
        cache = services.caches.get(self.cache)
        keys = [plan.key, *(k for _, k in plan.earlier)]
        found = await lookup(cache, keys, timeout_s=self.timeout_s, stats=stats)
        if found[0] is not None:
            stats.cache_hits += 1
            return found[0], "reused a cached summary"
        start, prior = self._fold_start(messages, plan, found[1:])
        transcript = [messages[i] for u in plan.candidates[start : plan.cut] for i in u.indexes()]
        prompt = build_prompt(
            transcript,
            prior=prior,
            nonce=nonce_for(plan.key),
            instructions=self._instructions(),
            max_tokens=self.max_summary_tokens,
            counter=ctx.counter,
            model=ctx.model,
        )
        completion = await self._call(prompt, services)
        if completion is None:
            return None
        await store(cache, plan.key, completion.text, timeout_s=self.timeout_s, stats=stats)
        how = f"{self.model} read {completion.prompt_tokens:,} and wrote "
        how += f"{completion.completion_tokens:,} tokens"
        return completion.text, how + (", folding in an earlier summary" if prior else "")

    @staticmethod
    def _fold_start(
        messages: Sequence[Message], plan: SpanPlan, earlier: list[str | None]
    ) -> tuple[int, str | None]:
        """Where the transcript starts, and the summary of what comes before it, if any.

        The newest cached summary of an earlier cut wins; else a summary message that
        opens the span; else the transcript is the whole span.
        """
        for (cut, _), text in zip(plan.earlier, earlier, strict=True):
            if text is not None:
                return cut, text
        opening = messages[plan.candidates[0].start]
        return (1, prior_text(opening)) if is_summary(opening) else (0, None)

    async def _call(self, prompt: list[Message], services: Services) -> Completion | None:
        """The model's summary (text stripped), or None after counting the failure."""
        request = SummaryRequest(self.upstream, self.model, self.max_summary_tokens, self.timeout_s)
        stats = services.stats
        stats.calls += 1
        try:
            async with asyncio.timeout(self.timeout_s):
                completion = await services.complete(prompt, request)
            text = completion.text.strip()
            if not text:
                raise ValueError("the model returned an empty summary")
        except Exception as exc:  # fail-open: token_budget, next in the chain, takes over
            error = "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
            stats.failures += 1
            stats.errors.append(f"{self.name} via {self.upstream}/{self.model}: {error}")
            log.warning("summarizer call to %s/%s failed: %s", self.upstream, self.model, error)
            return None
        stats.prompt_tokens += completion.prompt_tokens
        stats.completion_tokens += completion.completion_tokens
        return Completion(text, completion.prompt_tokens, completion.completion_tokens)


def _text(field: str, value: object) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ParamError(field, f"must be a non-empty string, got {value!r}")
