"""The conversation page's cache bar: one segment per turn, coloured by why its cache missed.

Reads each record's `cache` field (`proxy.observability.usage.attribution`). A segment links
to its request page at the element where the prompt parted from the last turn's (the
client's message for `client`, the curated one for `curation`), one click from the bar;
its title says the cause and the tokens re-billed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from markupsafe import Markup

from proxy.viewer.layout import request_href

LABELS = {
    "first_turn": "first turn",
    "none": "cache held",
    "client": "client changed its prompt",
    "curation": "curation moved the prefix",
    "expiry": "expired at the provider",
    "model_change": "model changed",
}
"""Each cause as the legend names it (its CSS class is `cause-<cause>`)."""


def cache_bar(turns: Sequence[Mapping[str, Any]], prefix: str) -> Markup:
    """The bar and its legend; nothing when no turn has a `cache` field (older records)."""
    if not any(isinstance(t.get("cache"), Mapping) for t in turns):
        return Markup("")
    segments = Markup("").join(_segment(n + 1, t, prefix) for n, t in enumerate(turns))
    legend = Markup("").join(
        Markup('<li><span class="swatch cause-{}"></span>{}</li>').format(cause, label)
        for cause, label in LABELS.items()
    )
    return Markup(
        '<section aria-labelledby="cache-h"><h2 id="cache-h">Why the cache missed</h2>'
        '<ol class="cachebar" id="cachebar">{segments}</ol>'
        '<ul class="legend">{legend}</ul></section>'
    ).format(segments=segments, legend=legend)


def _segment(n: int, turn: Mapping[str, Any], prefix: str) -> Markup:
    cache = turn.get("cache")
    if not isinstance(cache, Mapping):
        return Markup(
            '<li class="cause-unknown"><span class="sr-only">turn {}: not attributed</span></li>'
        ).format(n)
    cause = str(cache.get("cause"))
    cause = cause if cause in LABELS else "unknown"
    rebilled = cache.get("rebilled_tokens")
    tokens = f", {rebilled:,} tokens re-billed" if isinstance(rebilled, int) and rebilled else ""
    at = cache.get("diverged_at")
    where = f" at {_element(at)}" if isinstance(at, Mapping) else ""
    title = f"turn {n}: {LABELS.get(cause, cause)}{tokens}{where}"
    link = request_href(prefix, turn.get("id")) + _anchor(at)
    return Markup(
        '<li class="cause-{cause}" data-cause="{cause}"><a href="{link}" title="{title}">'
        '<span class="sr-only">{title}</span></a></li>'
    ).format(cause=cause, link=link, title=title)


def _element(at: Mapping[str, Any]) -> str:
    side = "client's" if at.get("prompt") == "original" else "curated"
    if at.get("element") == "prompt_cache_key":
        return "the client's prompt_cache_key"
    if at.get("element") == "tools":
        return f"the {side} tools"
    return f"{side} message #{at.get('index')}"


def _anchor(at: object) -> str:
    """The request page's anchor of a message (`#o3`, `#c3`; the tools have none)."""
    if not isinstance(at, Mapping) or at.get("element") != "message":
        return ""
    index = at.get("index")
    if not isinstance(index, int) or isinstance(index, bool):
        return ""
    return f"#{'o' if at.get('prompt') == 'original' else 'c'}{index}"
