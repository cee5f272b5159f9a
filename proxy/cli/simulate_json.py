"""`curator simulate --json`: the report as one JSON object, written as it goes.

The object is what `json.dumps(..., indent=2)` makes of `{"pricing", "summaries_are_placeholders",
"requests": [...], "total"}`, byte for byte, but each request's item is written when it is
simulated, so a long run holds one item, not all of them.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from typing import Any

from proxy.cli.simulate_model import CostTotal, Options, Priced, Report
from proxy.cli.simulate_render import diff_lines, utilization


def render_json(priced: Iterable[Priced], report: Report, options: Options) -> Iterator[str]:
    """The JSON report in pieces; each request is added to `report` as it is written."""
    head = {
        "pricing": asdict(report.pricing),
        "summaries_are_placeholders": not options.allow_calls,
    }
    yield _dumps(head)[:-2] + ',\n  "requests": ['
    count = 0
    for item in priced:
        report.add(item)
        yield (
            ("," if count else "")
            + "\n"
            + textwrap.indent(_dumps(request_item(item, options)), "    ")
        )
        count += 1
    yield ("\n  ]" if count else "]") + ',\n  "total": '
    total = {"original": _totals(report.original), "curated": _totals(report.curated)}
    yield textwrap.indent(_dumps(total), "  ").lstrip() + "\n}\n"


def request_item(priced: Priced, options: Options) -> dict[str, Any]:
    """One request's object in the `requests` array."""
    o = priced.outcome
    actions = o.result.actions if o.result is not None else ()
    item: dict[str, Any] = {
        "line": o.request.line,
        "model": o.request.model,
        "route": o.route,
        "policy": o.policy,
        "budget": asdict(o.budget),
        "rejected": o.rejected,
        "skipped": o.skipped,
        "tokens_before": o.tokens_before,
        "tokens_after": o.result.tokens_after if o.result is not None else None,
        "utilization": (
            o.result.tokens_after / o.budget.messages
            if o.result is not None and o.budget.messages > 0
            else None
        ),
        "utilization_by_curator": dict(utilization(o)),
        "actions": [asdict(a) for a in actions],
        "summarizer": asdict(o.summaries) if o.summaries is not None else None,
        "cost": {"original": asdict(priced.original), "curated": asdict(priced.curated)},
    }
    if options.diff:
        item["diff"] = "\n".join(diff_lines(o.request.messages, o.curated))
    return item


def _dumps(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _totals(cost: CostTotal) -> dict[str, float]:
    keys = ("input_tokens", "cached_tokens", "cost", "hit_ratio")
    return {key: getattr(cost, key) for key in keys}
