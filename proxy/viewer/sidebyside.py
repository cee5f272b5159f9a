"""Original and curated conversations side by side, one row per message.

Rows come from `proxy.observability.audit.alignment` (the same matching `curator audit
diff` prints): a message kept as is, shortened (the kept head and tail around the cut), dropped
(collapsed and struck through), or inserted by the proxy (a summary, linked to the messages
it replaced). Each change names the actions that made it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from markupsafe import Markup

from policies.invariants import is_summary
from policies.messages import shown_text, text_of
from proxy.observability.audit.alignment import common_prefix, match

Change = Literal["same", "changed", "dropped", "inserted"]


@dataclass(slots=True)
class Row:
    change: Change
    i: int | None
    """Index in the original messages."""
    j: int | None
    """Index in the curated messages."""
    replaced: list[int] = field(default_factory=list)
    """For an inserted summary: the original indexes it stands for."""
    summarized_into: int | None = None


def rows(record: Mapping[str, Any]) -> list[Row]:
    original, curated = record.get("original") or [], record.get("curated") or []
    _, matched = match(record)
    taken = set(matched.values())
    out: list[Row] = []
    next_j = 0

    def inserted_until(stop: int) -> None:
        for j in range(next_j, stop):
            if j not in taken:
                out.append(Row("inserted", None, j))

    for i, msg in enumerate(original):
        j = matched.get(i)
        if j is None:
            out.append(Row("dropped", i, None))
            continue
        inserted_until(j)
        next_j = max(next_j, j + 1)
        out.append(Row("same" if curated[j] == msg else "changed", i, j))
    inserted_until(len(curated))
    _link_summaries(out, curated)
    return out


def _link_summaries(out: list[Row], curated: Sequence[Any]) -> None:
    """A summary stands for the run of dropped messages just before it."""
    for n, row in enumerate(out):
        if row.change != "inserted" or row.j is None or not _summary(curated[row.j]):
            continue
        k = n - 1
        while k >= 0 and out[k].change == "dropped":
            k -= 1
        for dropped in out[k + 1 : n]:
            if dropped.i is not None:
                row.replaced.append(dropped.i)
                dropped.summarized_into = row.j


def _summary(msg: object) -> bool:
    return isinstance(msg, Mapping) and is_summary(msg)


def render(record: Mapping[str, Any]) -> Markup:
    original, curated = record.get("original") or [], record.get("curated") or []
    blame, _ = match(record)
    body = Markup("").join(
        _row(n, row, original, curated, blame.get(row.i, []) if row.i is not None else [])
        for n, row in enumerate(rows(record))
    )
    return Markup(
        '<table class="sbs" id="sbs"><caption class="sr-only">Messages, original beside '
        'curated</caption><thead><tr><th scope="col">Original: what the client sent '
        '({n_orig} messages)</th><th scope="col">Curated: what the upstream got '
        "({n_cur} messages)</th></tr></thead><tbody>{body}</tbody></table>"
    ).format(n_orig=len(original), n_cur=len(curated), body=body)


def _row(
    n: int,
    row: Row,
    original: Sequence[Any],
    curated: Sequence[Any],
    actions: Sequence[Mapping[str, Any]],
) -> Markup:
    notes = _notes(actions)
    if row.change == "dropped" and row.i is not None:
        left = _dropped(row.i, original[row.i], notes, row.summarized_into)
        right = Markup('<div class="gap" aria-label="not sent">{}</div>').format(
            Markup('summarized in <a href="#c{j}">curated #{j}</a>').format(j=row.summarized_into)
            if row.summarized_into is not None
            else "dropped"
        )
    elif row.change == "inserted" and row.j is not None:
        left = Markup('<div class="gap">added by the proxy</div>')
        right = _inserted(row.j, curated[row.j], row.replaced)
    elif row.i is not None and row.j is not None:
        before, after = original[row.i], curated[row.j]
        if row.change == "same":
            left, right = _message(row.i, "o", before), _message(row.j, "c", after)
        else:
            left, right = _shortened(row.i, row.j, before, after, notes)
    else:  # pragma: no cover - rows() never builds one
        return Markup("")
    return Markup(
        '<tr class="{change}" id="r{n}" tabindex="-1"><td>{left}</td><td>{right}</td></tr>'
    ).format(change=row.change, n=n, left=left, right=right)


def _notes(actions: Sequence[Mapping[str, Any]]) -> Markup:
    if not actions:
        return Markup("")
    items = Markup("").join(
        Markup(
            '<li><strong class="curator">{curator}</strong> {kind}: {reason} '
            '<span class="muted">(&minus;{tokens} tokens for this action)</span></li>'
        ).format(
            curator=a.get("curator"),
            kind=a.get("kind"),
            reason=a.get("reason") or "",
            tokens=f"{a['tokens_removed']:,}" if isinstance(a.get("tokens_removed"), int) else "?",
        )
        for a in actions
    )
    return Markup('<ul class="notes">{}</ul>').format(items)


def _head(index: int, side: str, msg: object, extra: Markup | str = "") -> Markup:
    role, ident = "?", ""
    if isinstance(msg, Mapping):
        role = str(msg.get("role"))
        ident = " ".join(f"{k}={msg[k]}" for k in ("name", "tool_call_id") if msg.get(k))
    return Markup(
        '<div class="head"><a class="idx" href="#{side}{i}" id="{side}{i}">#{i}</a> '
        '<span class="role role-{role}">{role}</span> <span class="muted">{ident}</span> '
        '<span class="size">{size} chars</span>{extra}</div>'
    ).format(side=side, i=index, role=role, ident=ident, size=f"{size(msg):,}", extra=extra)


def _message(index: int, side: str, msg: object) -> Markup:
    return Markup("{}{}").format(_head(index, side, msg), _content(msg))


def _content(msg: object, text: str | None = None) -> Markup:
    if not isinstance(msg, Mapping):
        return Markup('<div class="text">{}</div>').format(repr(msg))
    body = shown_text(msg) if text is None else text
    parts = msg.get("content")
    others = Markup("").join(
        Markup('<span class="chip">{} part</span>').format(p.get("type"))
        for p in (parts if isinstance(parts, list) else ())
        if isinstance(p, Mapping) and p.get("type") != "text"
    )
    text_html = Markup('<div class="text">{}</div>').format(body) if body else Markup("")
    return Markup("{}{}{}").format(text_html, others, calls(msg.get("tool_calls")))


def calls(value: object) -> Markup:
    items = []
    for call in value if isinstance(value, list) else ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping):
            items.append(
                Markup(
                    '<li><code>{name}({args})</code> <span class="muted">{id}</span></li>'
                ).format(name=fn.get("name"), args=fn.get("arguments"), id=call.get("id") or "")
            )
    return (
        Markup('<ul class="calls">{}</ul>').format(Markup("").join(items)) if items else Markup("")
    )


def _dropped(i: int, msg: object, notes: Markup, into: int | None) -> Markup:
    badge = Markup('<span class="badge">{}</span>').format(
        "summarized" if into is not None else "dropped"
    )
    return Markup(
        '<details class="dropped"><summary>{head}</summary><del>{content}</del></details>{notes}'
    ).format(head=_head(i, "o", msg, badge), content=_content(msg), notes=notes)


def _inserted(j: int, msg: object, replaced: Sequence[int]) -> Markup:
    links = Markup(", ").join(Markup('<a href="#o{i}">#{i}</a>').format(i=i) for i in replaced)
    note = Markup('<p class="replaces">Replaces original {}</p>').format(links) if replaced else ""
    badge = Markup('<span class="badge ins">{}</span>').format(
        "summary" if _summary(msg) else "inserted"
    )
    return Markup('<div class="inserted">{}{}{}</div>').format(
        _head(j, "c", msg, badge), note, _content(msg)
    )


def _shortened(
    i: int, j: int, before: object, after: object, notes: Markup
) -> tuple[Markup, Markup]:
    """The original with its cut struck through; the curated with the kept head and tail
    around what the curator put in the cut's place."""
    old = shown_text(before) if isinstance(before, Mapping) else ""
    new = shown_text(after) if isinstance(after, Mapping) else ""
    if old == new:  # the text survived; tool calls were repaired away
        badge = Markup('<span class="badge">tool calls changed</span>')
        return (
            Markup("{}{}{}").format(_head(i, "o", before, badge), _content(before), notes),
            _message(j, "c", after),
        )
    head = common_prefix(old, new)
    tail = common_prefix(old[head:][::-1], new[head:][::-1])
    cut = len(old) - head - tail
    badge = Markup('<span class="badge">{} chars cut</span>').format(f"{cut:,}")
    old_html = Markup(
        '<div class="text">{head}<details class="cut"><summary>{n} chars cut</summary>'
        "<del>{mid}</del></details>{tail}</div>"
    ).format(
        head=old[:head], n=f"{cut:,}", mid=old[head : len(old) - tail], tail=old[len(old) - tail :]
    )
    new_html = Markup(
        '<div class="text">{head}<mark class="placeholder" title="put in place of {n} chars">'
        "{mid}</mark>{tail}</div>"
    ).format(
        head=new[:head], n=f"{cut:,}", mid=new[head : len(new) - tail], tail=new[len(new) - tail :]
    )
    left = Markup("{}{}{}{}").format(
        _head(i, "o", before, badge), old_html, calls(_get(before, "tool_calls")), notes
    )
    right = Markup("{}{}{}").format(
        _head(j, "c", after), new_html, calls(_get(after, "tool_calls"))
    )
    return left, right


def _get(msg: object, key: str) -> object:
    return msg.get(key) if isinstance(msg, Mapping) else None


def size(msg: object) -> int:
    """Characters of text and tool-call arguments, as `curator audit diff` counts them."""
    if not isinstance(msg, Mapping):
        return len(str(msg))
    found = msg.get("tool_calls")
    args = 0
    for call in found if isinstance(found, list) else ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(fn, Mapping):
            args += len(str(fn.get("arguments") or ""))
    return len(text_of(msg)) + args
