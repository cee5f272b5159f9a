"""`curator simulate --summary`: totals per route and policy, then the overall totals,
instead of a report per request (a 400-request agent run printed 41,787 lines).

Each group is a `Report` of its own; what it holds does not grow with the requests (see
`simulate_model.Report`), so neither does the summary, but with the number of groups.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict

from proxy.cli.simulate_model import Options, Priced, Report
from proxy.cli.simulate_render import header, total_lines

Groups = dict[tuple[str, str], Report]
COLUMNS = (
    "ROUTE", "POLICY", "REQS", "REJECTED", "SKIPPED", "BEFORE", "AFTER", "ORIGINAL", "CURATED",
    "SHARE",
)  # fmt: skip


def summed(priced: Iterable[Priced], report: Report) -> Groups:
    """Every request added to `report` and to its route and policy's group."""
    groups: Groups = {}
    for item in priced:
        report.add(item)
        key = (item.outcome.route or "-", item.outcome.policy)
        group = groups.get(key)
        if group is None:
            group = groups[key] = Report(report.pricing)
        group.add(item)
    return groups


def render_summary(priced: Iterable[Priced], report: Report, options: Options) -> Iterator[str]:
    """The text summary: a table of the groups (costs in units of an uncached input
    token; SHARE: curated over original), then the overall totals."""
    groups = summed(priced, report)
    cells = [list(COLUMNS)]
    for (route, policy), group in sorted(groups.items()):
        original, curated = group.original.cost, group.curated.cost
        share = f"{curated / original:.1%}" if original else "-"
        counts = (group.requests, group.rejected, group.skipped)
        tokens = (group.tokens_before, group.tokens_after)
        money = (f"{original:,.1f}", f"{curated:,.1f}")
        cells.append([route, policy, *map(str, counts), *(f"{t:,}" for t in tokens), *money, share])
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    table = [
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    ]
    yield "\n".join([header(options), "", *table, "", *total_lines(report)]) + "\n"


def render_summary_json(
    priced: Iterable[Priced], report: Report, options: Options
) -> Iterator[str]:
    """`--summary --json`: the groups' totals and the overall ones, no request items."""
    groups = summed(priced, report)
    data = {
        "pricing": asdict(report.pricing),
        "summaries_are_placeholders": not options.allow_calls,
        "groups": [
            {"route": route, "policy": policy, **_figures(group)}
            for (route, policy), group in sorted(groups.items())
        ],
        "total": _figures(report),
    }
    yield json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _figures(report: Report) -> dict[str, object]:
    costs = {
        label: {
            "input_tokens": cost.input_tokens,
            "cached_tokens": cost.cached_tokens,
            "cost": cost.cost,
            "hit_ratio": cost.hit_ratio,
        }
        for label, cost in (("original", report.original), ("curated", report.curated))
    }
    return {
        "requests": report.requests,
        "rejected": report.rejected,
        "skipped": report.skipped,
        "tokens_before": report.tokens_before,
        "tokens_after": report.tokens_after,
        "actions": report.actions,
        **costs,
    }
