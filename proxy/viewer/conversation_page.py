"""The Conversation page: one conversation's requests in order, with its token curve."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from markupsafe import Markup

from proxy.viewer.cache_bar import cache_bar
from proxy.viewer.layout import (
    DASH,
    action_counts,
    cached_tokens,
    num,
    request_href,
    status_badge,
    tokens,
    when,
)

CHART_W, CHART_H, PAD = 720, 220, 36
MIN_BAR = 2.0
"""The narrowest bar drawn, in the chart's units (a pair per turn, or per run of turns)."""
LOG_RATIO = 10
"""A chart whose tallest bar is this many times its shortest non-zero one is drawn on a
log scale: a 1.8M-token "before" left a 15k "after" under one unit high."""


def render(key: str, turns: Sequence[Mapping[str, Any]], *, prefix: str, more: bool) -> Markup:
    """`turns` oldest first."""
    if not turns:
        return Markup("<h1>Conversation <code>{}</code></h1><p>No records.</p>").format(key)
    cap = Markup('<p class="muted">Only the newest {} turns are shown.</p>').format(len(turns))
    return Markup(
        "<h1>Conversation <code>{key}</code></h1>"
        '<p class="muted">Requests whose history extends the one before (or that share an '
        "<code>x-session-id</code>); {n} requests.</p>"
        "{cap}{chart}{cache}{table}"
    ).format(
        key=key, n=len(turns), cap=cap if more else "", chart=chart(turns),
        cache=cache_bar(turns, prefix), table=_table(turns, prefix),
    )  # fmt: skip


def chart(turns: Sequence[Mapping[str, Any]]) -> Markup:
    """Bars of tokens before (light) and after (dark) curation, and a line of cached tokens.

    Each turn gets its pair of bars while they fit at `MIN_BAR` wide; a longer conversation
    gets a pair per run of consecutive turns, as tall as the run's largest (and the line a
    point per run: its last turn's), so the bars never overlap or leave the plot whatever
    the number of turns."""
    series = [
        (_int(t.get("tokens_before")), _int(t.get("tokens_after")), cached_tokens(t) or 0)
        for t in turns
    ]
    top = max([1, *(max(s) for s in series)])
    low = min([top, *(v for s in series for v in s if v > 0)])
    log = top >= LOG_RATIO * low
    inner_w, inner_h = CHART_W - 2 * PAD, CHART_H - 2 * PAD
    per = math.ceil(len(series) / max(1, int(inner_w // (2 * MIN_BAR))))
    runs = [series[k : k + per] for k in range(0, len(series), per)]
    step = inner_w / len(runs)
    bar = step / 2 if per > 1 else max(MIN_BAR, step * 0.4)

    def y(v: int) -> float:
        if log:
            return PAD + inner_h * (1 - math.log10(1 + v) / math.log10(1 + top))
        return PAD + inner_h * (1 - v / top)

    shapes: list[Markup] = []
    points = []
    for n, run in enumerate(runs):
        before, after = max(b for b, _, _ in run), max(a for _, a, _ in run)
        x = PAD + n * step + (step - 2 * bar) / 2
        first, last = n * per + 1, n * per + len(run)
        what, most = (
            (f"turn {first}:", "") if first == last else (f"turns {first}-{last}:", "up to ")
        )
        shapes.append(_rect("before", x, y(before), bar, before, f"{what} {most}{before:,} sent"))
        shapes.append(_rect("after", x + bar, y(after), bar, after, f"after: {most}{after:,}"))
        points.append(f"{x + bar:.1f},{y(run[-1][2]):.1f}")
    line = Markup('<polyline class="cached" points="{}"/>').format(" ".join(points))
    return _figure(shapes, line, top, _ticks(top, y) if log else Markup(""))


def _ticks(top: int, y: Callable[[int], float]) -> Markup:
    """Log-scale gridlines at each power of ten below `top`, labelled."""
    marks = [10**e for e in range(1, len(str(top))) if 10**e < top]
    return Markup("").join(
        Markup(
            '<line x1="{p}" y1="{y:.1f}" x2="{r}" y2="{y:.1f}" class="grid"/>'
            '<text x="2" y="{ty:.1f}" class="axis tick">{label}</text>'
        ).format(p=PAD, r=CHART_W - PAD, y=y(m), ty=y(m) + 4, label=_short(m))
        for m in marks
    )


def _short(value: int) -> str:
    for size, unit in ((1_000_000, "M"), (1_000, "k")):
        if value >= size:
            return f"{value // size}{unit}"
    return str(value)


def _figure(shapes: Sequence[Markup], line: Markup, top: int, ticks: Markup) -> Markup:
    scale = " (log scale)" if ticks else ""
    axis = Markup(
        '<text x="{p}" y="{t}" class="axis">{top}</text><text x="{p}" y="{b}" class="axis">0</text>'
    ).format(p=2, t=PAD - 6, b=CHART_H - PAD + 14, top=f"{top:,}")
    return Markup(
        '<figure class="chart"><svg viewBox="0 0 {w} {h}" role="img" aria-labelledby="chart-t">'
        '<title id="chart-t">Tokens per turn: before and after curation, and cached{scale}</title>'
        '<line x1="{p}" y1="{base}" x2="{r}" y2="{base}" class="base"/>{ticks}{shapes}{line}'
        "{axis}</svg>"
        '<figcaption>Tokens per turn{scale}: <span class="key before"></span> before curation '
        '<span class="key after"></span> after <span class="key cached"></span> cached by the '
        "upstream</figcaption></figure>"
    ).format(
        w=CHART_W, h=CHART_H, p=PAD, r=CHART_W - PAD, base=CHART_H - PAD,
        shapes=Markup("").join(shapes), line=line, axis=axis, ticks=ticks, scale=scale,
    )  # fmt: skip


def _rect(kind: str, x: float, top: float, w: float, value: int, label: str) -> Markup:
    height = max(0.0, CHART_H - PAD - top) if value else 0.0
    return Markup(
        '<rect class="{k}" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}">'
        "<title>{label}</title></rect>"
    ).format(k=kind, x=x, y=CHART_H - PAD - height, w=w, h=height, label=label)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def first_cut(record: Mapping[str, Any]) -> int | None:
    """The lowest message index any action touched: where the cut sits this turn."""
    found = [
        i
        for a in record.get("actions") or ()
        if isinstance(a, Mapping)
        for i in a.get("indexes") or ()
        if isinstance(i, int)
    ]
    return min(found) if found else None


def _table(turns: Sequence[Mapping[str, Any]], prefix: str) -> Markup:
    rows = Markup("").join(
        Markup(
            '<tr><td>{n}</td><td><a class="rowlink" href="{link}">{time}</a></td><td>{msgs}</td>'
            "<td>{tokens}</td><td>{cached}</td><td>{cut}</td><td>{actions}</td><td>{status}</td>"
            "</tr>"
        ).format(
            n=n + 1,
            link=request_href(prefix, t.get("id")),
            time=when(t.get("time")),
            msgs=f"{t.get('messages', DASH)} → {t.get('curated_messages', DASH)}",
            tokens=tokens(t),
            cached=num(cached_tokens(t)),
            cut=num(first_cut(t)),
            actions=action_counts(t),
            status=status_badge(t.get("status")),
        )
        for n, t in enumerate(turns)
    )
    return Markup(
        '<table class="requests" id="turns"><thead><tr><th scope="col">Turn</th>'
        '<th scope="col">Time (UTC)</th><th scope="col">Messages</th><th scope="col">Tokens'
        '</th><th scope="col">Cached</th><th scope="col">First change at</th>'
        '<th scope="col">Actions</th><th scope="col">Status</th></tr></thead>'
        "<tbody>{}</tbody></table>"
    ).format(rows)
