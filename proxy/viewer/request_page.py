"""The Request page: what the proxy changed and why, then the response and the raw record."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from markupsafe import Markup

from proxy.viewer import sidebyside
from proxy.viewer.layout import (
    DASH,
    cached_tokens,
    href,
    ms,
    num,
    request_href,
    status_badge,
    tokens,
    uncurated_cost,
    when,
)

REDACTION = {
    "ok": "Redacted: secrets were masked before the record was written.",
    "failed": "Redaction failed: every client and upstream string was masked.",
}


def render(
    record: Mapping[str, Any],
    conversation: str,
    *,
    prefix: str,
    children: Sequence[Mapping[str, Any]] = (),
) -> Markup:
    """`children`: the records of calls made on this request's behalf (`parent_id`)."""
    rid = str(record.get("id", ""))
    raw = href(prefix, f"/requests/{rid}.json")
    return Markup(
        '<h1>Request <code class="rid">{rid}</code></h1>'
        '<p class="links"><a href="{raw}" id="raw-json">Raw JSON</a> · '
        '<a href="{conv}">This conversation</a>{parent}{children}</p>'
        "{facts}{changes}"
        '<section aria-labelledby="msgs-h"><h2 id="msgs-h">Messages</h2>'
        '<p><label><input type="checkbox" id="only-changes"> Show only changed messages</label> '
        '<span class="muted">Keys: <kbd>j</kbd>/<kbd>k</kbd> next/previous change</span></p>'
        "{sbs}</section>{response}"
    ).format(
        rid=rid,
        raw=raw,
        conv=href(prefix, f"/conversations/{conversation}"),
        parent=_parent(record, prefix),
        children=_children(children, prefix),
        facts=_facts(record),
        changes=_changes(record),
        sbs=sidebyside.render(record),
        response=_response(record),
    )


def _parent(record: Mapping[str, Any], prefix: str) -> Markup:
    parent = record.get("parent_id")
    if not parent:
        return Markup("")
    label = (
        "rescued attempt (the upstream refused it as too long; curated again) of"
        if record.get("mode") == "rescued"
        else "summarized for"
    )
    return Markup(' · <span id="parent">{} <a href="{}">{}</a></span>').format(
        label, request_href(prefix, parent), str(parent)[:12]
    )


def _children(children: Sequence[Mapping[str, Any]], prefix: str) -> Markup:
    if not children:
        return Markup("")
    links = Markup(", ").join(
        Markup('<a href="{}">{} {}</a>').format(
            request_href(prefix, c.get("id")),
            "rescued attempt" if c.get("mode") == "rescued" else "summary",
            str(c.get("id"))[:12],
        )
        for c in children
    )
    return Markup(' · <span id="children">made on its behalf: {}</span>').format(links)


def _facts(r: Mapping[str, Any]) -> Markup:
    redaction = str(r.get("redaction") or "unknown")
    items = (
        ("Time (UTC)", when(r.get("time"))),
        ("Kind", r.get("kind")),
        ("Route", r.get("route")),
        ("Policy", r.get("policy")),
        ("Mode", r.get("mode")),
        ("Model", r.get("model")),
        ("Status", status_badge(r.get("status"))),
        ("Tokens sent", tokens(r)),
        ("Cached prompt tokens", num(cached_tokens(r))),
        ("Uncurated cost", uncurated_cost(r)),
        ("Latency", ms(r.get("latency_ms"))),
        ("Time to first byte", ms(r.get("ttfb_ms"))),
        ("Client key", r.get("client") or "none"),
        ("x-curator-request-id", r.get("id")),
        ("Redaction", Markup('<span class="redaction {}">{}</span>').format(
            redaction, REDACTION.get(redaction, redaction))),
    )  # fmt: skip
    rows = Markup("").join(
        Markup("<div><dt>{}</dt><dd>{}</dd></div>").format(k, DASH if v is None else v)
        for k, v in items
    )
    skip = r.get("skip_reason")
    note = Markup('<p class="skip">Curation skipped: {}</p>').format(skip) if skip else ""
    return Markup('<section aria-label="Summary"><dl class="facts">{}</dl>{}</section>').format(
        rows, note
    )


def _changes(r: Mapping[str, Any]) -> Markup:
    actions = [a for a in r.get("actions") or () if isinstance(a, Mapping)]
    if not actions:
        body = Markup('<p class="muted">No curator changed this request.</p>')
    else:
        body = Markup(
            '<table class="changes"><thead><tr><th scope="col">Curator</th><th scope="col">'
            'Did</th><th scope="col">Messages (its input)</th><th scope="col">Tokens removed'
            '</th><th scope="col">Why</th></tr></thead><tbody>{}</tbody></table>'
        ).format(
            Markup("").join(
                Markup(
                    "<tr><td>{}</td><td>{}</td><td>{}</td><td class=num>{}</td><td>{}</td></tr>"
                ).format(
                    a.get("curator") or DASH,
                    a.get("kind") or DASH,
                    ", ".join(str(i) for i in a.get("indexes") or ()),
                    num(a.get("tokens_removed")),
                    a.get("reason") or "",
                )
                for a in actions
            )
        )
    return Markup(
        '<section aria-labelledby="changes-h"><h2 id="changes-h">What changed</h2>{}</section>'
    ).format(body)


def _response(r: Mapping[str, Any]) -> Markup:
    response, error = r.get("response"), r.get("error")
    parts = []
    if isinstance(response, Mapping):
        usage = response.get("usage")
        parts.append(
            Markup(
                '<p>Finish: <strong>{finish}</strong>{cut}</p><div class="text">{text}</div>{calls}'
                '<h3>Usage</h3><pre class="json">{usage}</pre>'
            ).format(
                finish=response.get("finish_reason") or DASH,
                cut=" (stream cut short; partial)" if response.get("truncated") else "",
                text=response.get("text") or "",
                calls=sidebyside.calls(response.get("tool_calls")),
                usage=orjson.dumps(usage, option=orjson.OPT_INDENT_2).decode(),
            )
        )
    if error is not None:
        parts.append(
            Markup('<h3>Error</h3><pre class="json">{}</pre>').format(
                orjson.dumps(error, option=orjson.OPT_INDENT_2).decode()
            )
        )
    if not parts:
        parts.append(Markup('<p class="muted">No response stored.</p>'))
    return Markup(
        '<section aria-labelledby="resp-h"><h2 id="resp-h">Response</h2>{}</section>'
    ).format(Markup("").join(parts))
