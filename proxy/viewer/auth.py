"""Admin keys for the viewer: a Bearer header, or the cookie the login form sets.

The cookie holds a digest of the key, never the key, marked HttpOnly (no script reads it)
and SameSite=Strict (no other site's page sends it). Every other route is GET and reads
only, so a forged cross-site request could change nothing; the login POST checks that any
Origin it carries is the viewer's own. Keys are compared as digests in constant time,
every key every time, as `proxy.serving.guard.KeyRing` does.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl

from markupsafe import Markup

COOKIE = "curator_admin"
_COOKIE_CONTEXT = b"context-curator viewer cookie\x00"


class AdminKeys:
    """The viewer's keys, held as digests. Empty: every request is let in."""

    __slots__ = ("_cookies", "_digests")

    def __init__(self, keys: Iterable[str]) -> None:
        raw = [key.encode() for key in keys]
        self._digests = tuple(hashlib.sha256(k).digest() for k in raw)
        self._cookies = tuple(cookie_value(k).encode() for k in raw)

    def __bool__(self) -> bool:
        return bool(self._digests)

    def admits(self, headers: Mapping[str, str]) -> bool:
        """Whether the request carries a key: `Authorization: Bearer` or the cookie."""
        if not self._digests:
            return True
        scheme, _, token = headers.get("authorization", "").strip().partition(" ")
        if scheme.lower() == "bearer" and self.accepts(token.strip()):
            return True
        cookie = _cookie(headers.get("cookie", ""), COOKIE).encode()
        found = False
        for value in self._cookies:  # every one, always: no early exit
            found |= hmac.compare_digest(cookie, value)
        return found and bool(cookie)

    def accepts(self, key: str) -> bool:
        presented = hashlib.sha256(key.encode()).digest()
        found = False
        for digest in self._digests:
            found |= hmac.compare_digest(presented, digest)
        return found and bool(key)


def cookie_value(key: bytes) -> str:
    """What the login cookie holds for `key`: a digest only the viewer asks for."""
    return hashlib.sha256(_COOKIE_CONTEXT + key).hexdigest()


def set_cookie(key: str, prefix: str) -> tuple[str, str]:
    value = cookie_value(key.encode())
    return ("set-cookie", f"{COOKIE}={value}; Path={prefix or '/'}; HttpOnly; SameSite=Strict")


def clear_cookie(prefix: str) -> tuple[str, str]:
    return ("set-cookie", f"{COOKIE}=; Path={prefix or '/'}; Max-Age=0; HttpOnly; SameSite=Strict")


def login_form(body: bytes) -> tuple[str, str]:
    """(key, next path) from the urlencoded login form."""
    fields = dict(parse_qsl(body.decode("utf-8", "replace")))
    return fields.get("key", ""), safe_next(fields.get("next", ""))


def safe_next(target: str) -> str:
    """A same-site path to go to after login; anything else goes to the start page.

    Printable ASCII only: browsers drop tabs and line breaks from a URL, so `/<TAB>/evil`
    would lead to `//evil`, another site; and a header cannot carry the rest."""
    printable = target.isascii() and target.isprintable()
    if printable and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return ""


def same_origin(headers: Mapping[str, str]) -> bool:
    """A browser's POST names where its page came from; it must be this host. Clients that
    send neither header (curl, scripts) are not browsers a page could steer."""
    if headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    if origin is None:
        return True
    host = headers.get("host", "")
    return origin in (f"http://{host}", f"https://{host}")


def login_page(prefix: str, target: str, *, failed: bool) -> Markup:
    """The form, in the page shell's main element (styled by the same stylesheet once in)."""
    note = Markup('<p class="error" role="alert">That key was not accepted.</p>')
    return Markup(
        "<h1>Sign in</h1><p>This viewer needs an admin key (<code>auth.admin_keys</code>).</p>"
        "{note}"
        '<form method="post" action="{prefix}/login" class="login">'
        '<label for="key">Admin key</label> '
        '<input id="key" name="key" type="password" autocomplete="current-password" required '
        "autofocus> "
        '<input type="hidden" name="next" value="{target}">'
        '<button type="submit">Sign in</button></form>'
    ).format(note=note if failed else "", prefix=prefix, target=target)


def _cookie(header: str, name: str) -> str:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return ""
