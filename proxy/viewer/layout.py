"""The page shell (landmarks, navigation, theme) and the small formatting helpers pages share."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from markupsafe import Markup

from proxy.observability.audit.stamps import parse_iso

DASH = "\u2013"
"""An en dash: what a cell shows for no value."""
NAV = (("requests", "Requests"), ("overview", "Overview"))


def page(title: str, main: Markup, *, prefix: str, section: str = "", signed_in: bool) -> bytes:
    """A whole HTML document around `main`."""
    links = Markup("").join(
        Markup('<a href="{href}"{current}>{label}</a>').format(
            href=f"{prefix}/{name}",
            current=Markup(' aria-current="page"') if name == section else "",
            label=label,
        )
        for name, label in NAV
    )
    signout = (
        Markup('<a href="{}/logout" class="signout">Sign out</a>').format(prefix)
        if signed_in
        else ""
    )
    html = Markup(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        "<title>{title} · context-curator</title>"
        '<link rel="stylesheet" href="{prefix}/static/viewer.css">'
        '<script src="{prefix}/static/viewer.js"></script></head>'
        '<body><a class="skip" href="#main">Skip to content</a>'
        '<header class="top"><span class="brand">context-curator</span>'
        '<nav aria-label="Main">{links}</nav>'
        '<button type="button" id="theme-toggle" class="theme" aria-label="Switch theme">'
        "Theme</button>{signout}</header>"
        '<main id="main" tabindex="-1">{main}</main>'
        "<footer><p>Audit viewer · read-only · content is shown as the audit log stored it "
        "(redacted)</p></footer></body></html>"
    ).format(title=title, prefix=prefix, links=links, signout=signout, main=main)
    return str(html).encode()


def href(prefix: str, path: str, params: Mapping[str, object] | None = None) -> str:
    query = {k: v for k, v in (params or {}).items() if v not in (None, "")}
    tail = "?" + urlencode(query) if query else ""
    return prefix + path + tail


def request_href(prefix: str, record_id: object) -> str:
    return f"{prefix}/requests/{quote(str(record_id), safe='')}"


def num(value: object) -> str:
    """A count with thousands separators, or an en dash for none."""
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else DASH


def ms(value: object) -> str:
    return f"{value:,.0f} ms" if isinstance(value, int | float) else DASH


def when(stamp: object) -> str:
    """A record's ISO time, shown to the second in UTC."""
    try:
        moment = datetime.fromtimestamp(parse_iso(str(stamp)), UTC)
    except ValueError:
        return str(stamp)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def tokens(record: Mapping[str, Any]) -> Markup:
    before, after = record.get("tokens_before"), record.get("tokens_after")
    if not isinstance(before, int):
        return Markup(DASH)
    if not isinstance(after, int) or after == before:
        return Markup("{}").format(num(before))
    shown = Markup("{} → <strong>{}</strong>").format(num(before), num(after))
    if not before:
        return shown
    change = round(100 * abs(before - after) / before)
    if after > before:  # a curator that adds (a summary longer than its text) says so
        return shown + Markup(' <span class="grew">+{}%</span>').format(change)
    return shown + Markup(' <span class="saved">&minus;{}%</span>').format(change)


def uncurated_cost(record: Mapping[str, Any]) -> Markup | None:
    """What the request would have cost uncurated; an estimate says so, with its range."""
    cost = record.get("cost")
    figure = cost.get("uncurated_usd") if isinstance(cost, Mapping) else None
    if not isinstance(figure, int | float) or isinstance(figure, bool):
        return None
    assert isinstance(cost, Mapping)
    found = cost.get("uncurated_estimate")
    ends = found.get("usd_range") if isinstance(found, Mapping) else None
    if not (isinstance(ends, list) and len(ends) == 2):
        return Markup("${:.6f}").format(figure)
    assert isinstance(found, Mapping)
    why = "learned from the upstream's input tokens" if found.get("learned") else "counted high"
    return Markup(
        '<span class="estimate" title="encrypted reasoning priced by size, {}">'
        "~${:.6f} (estimate, ${:.6f}\u2013${:.6f})</span>"
    ).format(why, figure, float(ends[0]), float(ends[1]))


def cached_tokens(record: Mapping[str, Any]) -> int | None:
    """Prompt tokens the upstream served from its cache, when its usage says."""
    response = record.get("response")
    usage = response.get("usage") if isinstance(response, Mapping) else None
    if not isinstance(usage, Mapping):
        return None
    for key in ("prompt_tokens_details", "input_tokens_details"):
        details = usage.get(key)
        if isinstance(details, Mapping) and isinstance(details.get("cached_tokens"), int):
            cached: int = details["cached_tokens"]
            return cached
    return None


def prompt_tokens(record: Mapping[str, Any]) -> int | None:
    response = record.get("response")
    usage = response.get("usage") if isinstance(response, Mapping) else None
    if isinstance(usage, Mapping):
        for key in ("prompt_tokens", "input_tokens"):
            if isinstance(usage.get(key), int):
                value: int = usage[key]
                return value
    return None


def status_badge(status: object) -> Markup:
    ok = isinstance(status, int) and status < 400
    return Markup('<span class="status {}">{}</span>').format(
        "ok" if ok else "bad", status if status is not None else DASH
    )


def action_counts(record: Mapping[str, Any]) -> Markup:
    """`token_budget x3` chips, one per curator that acted; the skip reason when skipped."""
    if record.get("skip_reason"):
        return Markup('<span class="chip skip">skipped: {}</span>').format(record["skip_reason"])
    counts: dict[str, int] = {}
    for action in record.get("actions") or ():
        if isinstance(action, Mapping):
            name = str(action.get("curator"))
            counts[name] = counts.get(name, 0) + max(1, len(action.get("indexes") or ()))
    if not counts:
        return Markup('<span class="muted">unchanged</span>')
    return Markup(" ").join(
        Markup('<span class="chip">{} &times;{}</span>').format(k, v) for k, v in counts.items()
    )
