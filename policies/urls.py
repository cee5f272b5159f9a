"""Showing a configured URL without the credentials it may carry.

Operators put credentials in URLs (`https://user:key@host`, `redis://:password@host`,
`?key=...`); config errors, `curator check` and logs show such URLs with the password and
the query values masked.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
SHOWN_QUERY_NAMES = frozenset({"api-version"})
"""Query parameters whose values are shown as they are; every other value is masked."""
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s'\"<>]{0,4096}")


def masked_url(url: str) -> str:
    """`url` with its user info and query values masked (`***@host`, `?key=***`), for
    showing a configured URL whole (`curator check`, config errors, log lines). A user
    name alone can be the credential (`https://<token>@github.com`), so it goes too."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
        port = parts.port
    except ValueError:
        return "<invalid URL>"
    if host is None:
        return url if not parts.query and "@" not in url else "<URL hidden>"
    netloc = f"[{host}]" if ":" in host else host
    netloc += f":{port}" if port is not None else ""
    if "@" in parts.netloc:
        netloc = f"{MASK}@{netloc}"
    query = urlencode(
        [
            (name, value if name.lower() in SHOWN_QUERY_NAMES else MASK)
            for name, value in parse_qsl(parts.query, keep_blank_values=True)
        ],
        safe="*",
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment and MASK))


def mask_urls(text: str) -> str:
    """`text` with every URL in it masked as `masked_url` does."""
    return _URL.sub(lambda m: masked_url(m.group()), text) if "://" in text else text
