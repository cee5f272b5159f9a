"""Rendering for `curator simulate`: the text report, its JSON form, and message diffs.

The text report shows, per request, the budget, each curator's actions, tokens before and
after, the share of the budget used after each curator that acted, and the prefix-cache
price of the original and the curated request; then totals.
Diffs render messages as plain lines without indexes, so messages that were kept match
and only what a curator removed, cut or inserted shows as changed.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from policies.messages import Message, role, shown_text
from proxy.cli.simulate_model import Options, Priced, Report, SimulatedRequest


def header(options: Options) -> str:
    """The report's first line, printed before any request is read."""
    source = "standard input" if options.input == "-" else options.input or "the audit store"
    return f"curator simulate: requests from {source}"


def render_text(priced: Iterable[Priced], report: Report, options: Options) -> Iterator[str]:
    """The report as it goes, a request at a time (each added to `report`), then totals."""
    yield header(options) + "\n\n"
    for n, item in enumerate(priced):
        report.add(item)
        yield "\n".join(request_lines(n, item, options)) + "\n"
    yield "\n".join(total_lines(report)) + "\n"


def request_lines(n: int, priced: Priced, options: Options) -> list[str]:
    outcome = priced.outcome
    request, budget, result = outcome.request, outcome.budget, outcome.result
    route = f"route {outcome.route}, " if outcome.route is not None else ""
    lines = [
        f"request {n + 1} (line {request.line}): model {request.model or '(none)'}, "
        f"{route}policy {outcome.policy}",
        f"  budget: window {budget.context_window:,} - reply {budget.reserve_output:,} - "
        f"tools {budget.tools:,} - margin {budget.margin:,} = "
        f"{budget.messages:,} tokens for messages",
    ]
    if outcome.rejected is not None:
        return [*lines, f"  REJECTED: {outcome.rejected}", ""]
    if result is None:
        return [*lines, f"  SKIPPED: {outcome.skipped}; the proxy forwards it unchanged", ""]
    lines.append(f"  tokens: {_change(outcome.tokens_before, result.tokens_after)}")
    lines += [
        f"  {a.curator} {a.kind} {_indexes(a.indexes)} -{a.tokens_removed:,}: {a.reason}"
        for a in result.actions
    ] or ["  no curator changed anything"]
    lines.append(f"  budget use: {_use_line(outcome, result.tokens_after)}")
    stats = outcome.summaries
    if stats is not None and not options.allow_calls and stats.calls + stats.cache_hits:
        lines.append("  summarizer: the summary is a PLACEHOLDER, no model was called")
    lines += [f"  summarizer failed: {error}" for error in stats.errors] if stats else []
    for label, cost in (("original", priced.original), ("curated", priced.curated)):
        lines.append(
            f"  {label + ':':<10}{cost.input_tokens:>9,} input, {cost.cached_tokens:>9,} "
            f"cached -> {cost.cost:>11,.1f} units"
        )
    if options.diff:
        lines += ["", *diff_lines(request.messages, result.messages)]
    return [*lines, ""]


def total_lines(report: Report) -> list[str]:
    pricing, original, curated = report.pricing, report.original, report.curated
    lines = [
        f"total: {report.requests} request(s), {report.rejected} rejected, "
        f"{report.skipped} skipped",
        f"  message tokens: {_change(report.tokens_before, report.tokens_after)}",
        "  actions: " + (", ".join(f"{k}={v}" for k, v in report.actions.items()) or "none"),
        *_fill_lines(report),
        f"  prefix cache: cached input at {pricing.cached_price:g} of the input price, once "
        f"a prefix of >= {pricing.min_tokens:,} tokens repeats (in steps of {pricing.increment})",
        f"  {'':<10}{'input':>11} {'cached':>11} {'hit':>6} {'units':>13} {'cache saves':>13}",
    ]
    for label, cost in (("original", original), ("curated", curated)):
        lines.append(
            f"  {label:<10}{cost.input_tokens:>11,} {cost.cached_tokens:>11,} "
            f"{cost.hit_ratio:>6.1%} {cost.cost:>13,.1f} {cost.input_tokens - cost.cost:>13,.1f}"
        )
    if original.cost:
        lines.append(f"  curated costs {curated.cost / original.cost:.1%} of the original")
    return lines


def _fill_lines(report: Report) -> list[str]:
    """How much of the budget the requests that arrived over it were curated to use."""
    if not report.shares:
        return []
    shares = sorted(report.shares)
    median = shares[len(shares) // 2]
    return [
        f"  budget use of the {len(shares)} over-budget request(s): lowest {shares[0]:.1%}, "
        f"median {median:.1%}"
    ]


def utilization(outcome: SimulatedRequest) -> list[tuple[str, float]]:
    """Tokens after each curator that acted, as a share of the message budget, in chain
    order; the last is the curated request's. Derived from the tokens each action removed."""
    result, budget = outcome.result, outcome.budget.messages
    if result is None or budget <= 0:
        return []
    shares: dict[str, float] = {}
    tokens = outcome.tokens_before
    for action in result.actions:
        tokens -= action.tokens_removed
        shares.pop(action.curator, None)  # a curator is listed where it last acted
        shares[action.curator] = tokens / budget
    if shares:
        # The chain's own count, in case the actions' savings do not add up exactly.
        shares[next(reversed(shares))] = result.tokens_after / budget
    return list(shares.items())


def _use_line(outcome: SimulatedRequest, tokens_after: int) -> str:
    budget = outcome.budget.messages
    share = tokens_after / budget if budget > 0 else 0.0
    steps = ", ".join(f"{name} {used:.1%}" for name, used in utilization(outcome))
    return f"{share:.1%} of the budget" + (f" (after {steps})" if steps else "")


def _change(before: int, after: int) -> str:
    if before == after or not before:
        return f"{before:,} -> {after:,}"
    return f"{before:,} -> {after:,} ({(after - before) / before:+.1%})"


def _indexes(indexes: Sequence[int]) -> str:
    """`[2-9, 12]`: runs of consecutive message indexes collapsed."""
    runs: list[list[int]] = []
    for i in indexes:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return "[" + ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs) + "]"


def diff_lines(original: Sequence[Message], curated: Sequence[Message]) -> list[str]:
    """A unified diff of the messages as text; no indexes in it, so kept messages match."""
    diff = difflib.unified_diff(
        _readable(original), _readable(curated), "original", "curated", lineterm="", n=2
    )
    return list(diff) or ["(no difference)"]


def _readable(messages: Sequence[Message]) -> list[str]:
    lines: list[str] = []
    for msg in messages:
        ids = "".join(f" {k}={msg[k]}" for k in ("name", "tool_call_id") if msg.get(k))
        lines.append(f"## {role(msg)}{ids}")
        lines += [f"  {line}" for line in shown_text(msg).splitlines()]
        lines += [f"  [{part.get('type')} part]" for part in _items(msg.get("content"))]
        for call in _items(msg.get("tool_calls")):
            fn = call.get("function")
            name, args = (
                (fn.get("name"), fn.get("arguments")) if isinstance(fn, Mapping) else ("", "")
            )
            lines.append(f"  -> {name}({args}) id={call.get('id')}")
    return lines


def _items(value: object) -> list[Mapping[str, Any]]:
    """The objects of a list (content parts but text, tool calls); [] for anything else."""
    if not isinstance(value, list):
        return []
    return [v for v in value if isinstance(v, Mapping) and v.get("type") != "text"]
