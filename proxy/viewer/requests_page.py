"""The Requests page: newest first, paged, filtered; each row links to its request."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from proxy.observability.audit.readers.query import KINDS, Page, Query, parse_time
from proxy.viewer.layout import (
    DASH,
    action_counts,
    href,
    request_href,
    status_badge,
    tokens,
    when,
)

PAGE_SIZE = 50
FILTERS = ("route", "policy", "model", "status", "kind", "since", "until", "conversation", "q")
SELECTS = ("route", "policy", "model", "status", "kind")


class BadQuery(ValueError):
    """A filter value the page cannot use; shown above the form."""


def parse_query(params: Mapping[str, str], *, limit: int = PAGE_SIZE) -> Query:
    """The page's URL parameters -> a store query; raises BadQuery naming the parameter."""
    now = time.time()
    status = params.get("status") or None
    # ASCII only and three digits: str.isdigit admits "\u00b2", which int() refuses, and a
    # 30-digit number overflows SQLite's INTEGER.
    if status is not None and not (len(status) == 3 and _count(status) >= 100):
        raise BadQuery(f"status: expected an HTTP status such as 200, got {status!r}")
    try:
        since = parse_time(params["since"], now=now) if params.get("since") else None
        until = parse_time(params["until"], now=now) if params.get("until") else None
    except ValueError as exc:
        raise BadQuery(f"time range: {exc}") from None
    return Query(
        route=params.get("route") or None,
        policy=params.get("policy") or None,
        model=params.get("model") or None,
        status=int(status) if status else None,
        kind=params.get("kind") or None,
        since=since,
        until=until,
        conversation=params.get("conversation") or None,
        text=params.get("q") or None,
        limit=limit,
        offset=_offset(params),
    )


def _count(text: str) -> int:
    """`text` as a count when it is ASCII digits, else -1."""
    return int(text) if text.isascii() and text.isdigit() else -1


def _offset(params: Mapping[str, str]) -> int:
    """The records to skip; anything but a plain count that SQLite can hold starts at 0."""
    offset = params.get("offset", "")
    return max(0, _count(offset)) if len(offset) <= 18 else 0


def render(
    page: Page,
    params: Mapping[str, str],
    facets: Mapping[str, Sequence[str]],
    *,
    prefix: str,
    problem: str | None = None,
) -> Markup:
    offset = _offset(params)
    alert = Markup('<p class="error" role="alert">{}</p>').format(problem) if problem else ""
    body = _table(page.rows, prefix) if page.rows else Markup('<p class="empty">No records.</p>')
    return Markup(
        '<h1>Requests</h1>{form}{alert}<p class="count" aria-live="polite">{shown}</p>{body}{pager}'
    ).format(
        form=_form(params, facets, prefix),
        alert=alert,
        shown=_shown(len(page.rows), offset, page.more),
        body=body,
        pager=_pager(params, offset, len(page.rows), page.more, prefix),
    )


def _shown(count: int, offset: int, more: bool) -> str:
    if not count:
        return "Nothing matches."
    more_text = " (more follow)" if more else ""
    return f"Records {offset + 1}\u2013{offset + count}{more_text}, newest first."


def _form(params: Mapping[str, str], facets: Mapping[str, Sequence[str]], prefix: str) -> Markup:
    selects = Markup("").join(_select(name, params.get(name, ""), facets) for name in SELECTS)
    inputs = Markup("").join(
        Markup(
            '<label>{label} <input name="{name}" value="{value}" placeholder="{hint}" {extra}>'
            "</label>"
        ).format(label=label, name=name, value=params.get(name, ""), hint=hint, extra=extra)
        for name, label, hint, extra in (
            ("q", "Search messages", "text", Markup('type="search"')),
            ("since", "Since", "1h, 2d or ISO time", ""),
            ("until", "Until", "ISO time", ""),
            ("conversation", "Conversation", "key", ""),
        )
    )
    return Markup(
        '<form class="filters" role="search" method="get" action="{action}" aria-label="Filters">'
        '{selects}{inputs}<button type="submit">Filter</button> '
        '<a href="{action}">Clear</a></form>'
    ).format(action=f"{prefix}/requests", selects=selects, inputs=inputs)


def _select(name: str, current: str, facets: Mapping[str, Sequence[str]]) -> Markup:
    values = list(KINDS) if name == "kind" else [str(v) for v in facets.get(name, ())]
    if current and current not in values:
        values.append(current)
    options = Markup("").join(
        Markup('<option value="{v}"{sel}>{v}</option>').format(
            v=v, sel=Markup(" selected") if v == current else ""
        )
        for v in values
    )
    return Markup(
        '<label>{label} <select name="{name}"><option value="">any</option>{options}</select>'
        "</label>"
    ).format(label=name.capitalize(), name=name, options=options)


def _table(rows: Sequence[Mapping[str, Any]], prefix: str) -> Markup:
    head = Markup("").join(
        Markup('<th scope="col">{}</th>').format(c)
        for c in ("Time (UTC)", "Request", "Kind", "Model", "Route · policy", "Tokens",
                  "Cost", "Actions", "Status")
    )  # fmt: skip
    body = Markup("").join(_row(r, prefix) for r in rows)
    return Markup(
        '<table class="requests" id="requests"><caption class="sr-only">Audit records, newest '
        "first</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    ).format(head=head, body=body)


def _row(r: Mapping[str, Any], prefix: str) -> Markup:
    rid = str(r.get("id", ""))
    return Markup(
        '<tr data-id="{rid}"><td><time datetime="{iso}">{time}</time></td>'
        '<td><a class="rowlink" href="{link}" title="{rid}">{short}</a></td>'
        "<td>{kind}</td><td>{model}</td><td>{route} · {policy}</td><td>{tokens}</td>"
        "<td>{cost}</td><td>{actions}</td><td>{status}</td></tr>"
    ).format(
        rid=rid,
        iso=r.get("time", ""),
        time=when(r.get("time")),
        link=request_href(prefix, rid),
        short=rid[:12],
        kind=r.get("kind") or DASH,
        model=r.get("model") or DASH,
        route=r.get("route") or DASH,
        policy=r.get("policy") or DASH,
        tokens=tokens(r),
        cost=_cost(r),
        actions=action_counts(r),
        status=status_badge(r.get("status")),
    )


def _cost(r: Mapping[str, Any]) -> str:
    """The request's cost in USD, once records carry it (issue K); a dash until then."""
    cost = r.get("cost_usd")
    return f"${cost:,.4f}" if isinstance(cost, int | float) else DASH


def _pager(params: Mapping[str, str], offset: int, count: int, more: bool, prefix: str) -> Markup:
    kept = {k: params[k] for k in FILTERS if params.get(k)}
    links = []
    if offset > 0:
        newer = href(prefix, "/requests", {**kept, "offset": max(0, offset - PAGE_SIZE) or None})
        links.append(Markup('<a rel="prev" href="{}">← Newer</a>').format(newer))
    if more:
        older = href(prefix, "/requests", {**kept, "offset": offset + count})
        links.append(Markup('<a rel="next" href="{}">Older →</a>').format(older))
    return (
        Markup('<nav class="pager" aria-label="Pages">{}</nav>').format(Markup(" ").join(links))
        if links
        else Markup("")
    )
