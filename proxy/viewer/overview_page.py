"""The Overview page: requests, tokens saved and cache hits for a range, per route and policy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from proxy.viewer.layout import DASH, cached_tokens, num, prompt_tokens


@dataclass(slots=True)
class Totals:
    requests: int = 0
    errors: int = 0
    curated: int = 0
    before: int = 0
    after: int = 0
    prompt: int = 0
    cached: int = 0
    cost: float = 0.0
    costed: int = 0

    def add(self, r: Mapping[str, Any]) -> None:
        self.requests += 1
        status = r.get("status")
        self.errors += isinstance(status, int) and status >= 400
        before, after = r.get("tokens_before"), r.get("tokens_after")
        if isinstance(before, int) and isinstance(after, int):
            self.before += before
            self.after += after
            self.curated += after < before
        self.prompt += prompt_tokens(r) or 0
        self.cached += cached_tokens(r) or 0
        cost = r.get("cost_usd")
        if isinstance(cost, int | float):
            self.cost += cost
            self.costed += 1

    def saved_pct(self) -> str:
        return f"{100 * (self.before - self.after) / self.before:.1f}%" if self.before else DASH

    def cache_ratio(self) -> str:
        return f"{100 * self.cached / self.prompt:.1f}%" if self.prompt else DASH


def tally(rows: Iterable[Mapping[str, Any]]) -> tuple[Totals, dict[str, dict[str, Totals]]]:
    """Totals overall and by route and by policy."""
    total = Totals()
    groups: dict[str, dict[str, Totals]] = {"route": {}, "policy": {}}
    for r in rows:
        total.add(r)
        for key, group in groups.items():
            group.setdefault(str(r.get(key) or DASH), Totals()).add(r)
    return total, groups


def render(
    total: Totals,
    groups: Mapping[str, Mapping[str, Totals]],
    params: Mapping[str, str],
    *,
    prefix: str,
    capped: bool,
    problem: str | None,
) -> Markup:
    alert = Markup('<p class="error" role="alert">{}</p>').format(problem) if problem else ""
    cap = Markup('<p class="muted">Counted the newest records only (a cap); narrow the range.</p>')
    cards = Markup("").join(
        Markup(
            '<div class="card"><span class="label">{}</span><span class="value">{}</span></div>'
        ).format(label, value)
        for label, value in (
            ("Requests", num(total.requests)),
            ("Curated", num(total.curated)),
            ("Tokens saved", f"{num(total.before - total.after)} ({total.saved_pct()})"),
            ("Cache hit ratio", total.cache_ratio()),
            ("Cost", f"${total.cost:,.2f}" if total.costed else "not priced"),
            ("Errors", num(total.errors)),
        )
    )
    tables = Markup("").join(_group(name, groups[name]) for name in ("route", "policy"))
    return Markup(
        "<h1>Overview</h1>{form}{alert}{cap}"
        '<section aria-label="Totals" class="cards">{cards}</section>{tables}'
    ).format(
        form=_form(params, prefix), alert=alert, cap=cap if capped else "", cards=cards,
        tables=tables,
    )  # fmt: skip


def _form(params: Mapping[str, str], prefix: str) -> Markup:
    return Markup(
        '<form class="filters" method="get" action="{a}" aria-label="Range">'
        '<label>Since <input name="since" value="{s}" placeholder="24h, 7d or ISO time"></label>'
        '<label>Until <input name="until" value="{u}" placeholder="ISO time"></label>'
        '<button type="submit">Show</button></form>'
    ).format(a=f"{prefix}/overview", s=params.get("since", "7d"), u=params.get("until", ""))


def _group(name: str, totals: Mapping[str, Totals]) -> Markup:
    rows = Markup("").join(
        Markup(
            "<tr><th scope=row>{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"
        ).format(key, num(t.requests), num(t.before), num(t.after), t.saved_pct(), t.cache_ratio())
        for key, t in sorted(totals.items(), key=lambda kv: -kv[1].requests)
    )
    return Markup(
        '<section aria-labelledby="by-{n}"><h2 id="by-{n}">By {n}</h2><table class="totals">'
        '<thead><tr><th scope="col">{N}</th><th scope="col">Requests</th><th scope="col">Tokens '
        'before</th><th scope="col">After</th><th scope="col">Saved</th><th scope="col">Cache '
        "hits</th></tr></thead><tbody>{rows}</tbody></table></section>"
    ).format(n=name, N=name.capitalize(), rows=rows)
