"""The viewer's admin keys (auth.py): Bearer and cookie checks, the cookie's attributes, the
login form, the same-origin and redirect-target checks, and the login page."""

from __future__ import annotations

import hashlib
import hmac
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.viewer.auth import (
    COOKIE,
    AdminKeys,
    clear_cookie,
    cookie_value,
    login_form,
    login_page,
    safe_next,
    same_origin,
    set_cookie,
)

KEYS = ("adm-first-key", "adm-second-key")
HEX64 = re.compile(r"[0-9a-f]{64}")


@pytest.fixture
def keys() -> AdminKeys:
    return AdminKeys(KEYS)


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def cookie_of(key: str) -> str:
    return f"{COOKIE}={cookie_value(key.encode())}"


# -- AdminKeys -----------------------------------------------------------------------------


def test_without_keys_every_request_is_let_in() -> None:
    none = AdminKeys(())
    assert not none
    assert none.admits({})
    assert none.admits(bearer("anything"))
    assert not none.accepts("anything")  # but no key is ever accepted at the login form


def test_a_configured_set_is_truthy(keys: AdminKeys) -> None:
    assert keys
    assert not keys.admits({})


@pytest.mark.parametrize("key", KEYS)
def test_each_key_is_accepted_as_a_bearer(keys: AdminKeys, key: str) -> None:
    assert keys.accepts(key)
    assert keys.admits(bearer(key))


@pytest.mark.parametrize(
    "authorization",
    [
        f"bearer {KEYS[0]}",
        f"BEARER {KEYS[0]}",
        f"  Bearer {KEYS[0]}  ",
        f"Bearer    {KEYS[0]}",
    ],
)
def test_the_scheme_is_case_insensitive_and_blanks_around_are_ignored(
    keys: AdminKeys, authorization: str
) -> None:
    assert keys.admits({"authorization": authorization})


@pytest.mark.parametrize(
    "authorization",
    [
        "",
        "Bearer",
        "Bearer ",
        KEYS[0],
        f"Basic {KEYS[0]}",
        f"Bearer {KEYS[0][:-1]}",
        f"Bearer {KEYS[0]}x",
        f"Bearer {KEYS[0]} {KEYS[1]}",
        f"Bearer {KEYS[0].upper()}",
        f"Bearer {cookie_value(KEYS[0].encode())}",  # the cookie's digest is not a key
    ],
)
def test_anything_else_in_authorization_is_refused(keys: AdminKeys, authorization: str) -> None:
    assert not keys.admits({"authorization": authorization})


@pytest.mark.parametrize("key", ["", f"{KEYS[0]} ", " " + KEYS[0], "adm-third-key"])
def test_accepts_takes_the_key_exactly(keys: AdminKeys, key: str) -> None:
    assert not keys.accepts(key)


@pytest.mark.parametrize("key", KEYS)
def test_the_login_cookie_is_accepted(keys: AdminKeys, key: str) -> None:
    assert keys.admits({"cookie": cookie_of(key)})
    assert keys.admits({"cookie": f"theme=dark; {cookie_of(key)}; lang=en"})


@pytest.mark.parametrize(
    "cookie",
    [
        f"{COOKIE}={KEYS[0]}",  # the key itself is not the cookie
        f"{COOKIE}=",
        COOKIE,
        f"{COOKIE}={hashlib.sha256(KEYS[0].encode()).hexdigest()}",  # a bare digest of it
        f"{COOKIE}={cookie_value(b'adm-third-key')}",
        f"{COOKIE}2={cookie_value(KEYS[0].encode())}",
        f"x{COOKIE}={cookie_value(KEYS[0].encode())}",
        f"{COOKIE.upper()}={cookie_value(KEYS[0].encode())}",
        f"{COOKIE}={cookie_value(KEYS[0].encode()).upper()}",
    ],
)
def test_other_cookies_are_refused(keys: AdminKeys, cookie: str) -> None:
    assert not keys.admits({"cookie": cookie})


def test_a_wrong_bearer_does_not_spoil_a_right_cookie(keys: AdminKeys) -> None:
    assert keys.admits({"authorization": "Bearer wrong", "cookie": cookie_of(KEYS[1])})


def test_a_cookie_is_bound_to_its_own_set_of_keys() -> None:
    other = AdminKeys(["adm-other"])
    assert not other.admits({"cookie": cookie_of(KEYS[0])})


def test_every_key_is_compared_every_time(keys: AdminKeys, monkeypatch: pytest.MonkeyPatch) -> None:
    lengths: list[tuple[int, int]] = []
    compare = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        lengths.append((len(a), len(b)))
        return compare(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    assert keys.accepts(KEYS[0])  # a match on the first key still compares the second
    assert lengths == [(32, 32), (32, 32)]
    lengths.clear()
    assert keys.admits({"authorization": "Bearer wrong", "cookie": cookie_of(KEYS[0])})
    assert lengths == [(32, 32), (32, 32), (64, 64), (64, 64)]
    lengths.clear()
    assert not keys.admits({"authorization": "Bearer " + "y" * 500})
    assert lengths == [(32, 32), (32, 32), (0, 64), (0, 64)]


# -- the cookie ----------------------------------------------------------------------------


def test_the_cookie_is_a_digest_of_the_key_in_the_viewers_own_context() -> None:
    value = cookie_value(b"adm-1")
    assert HEX64.fullmatch(value)
    assert value == hashlib.sha256(b"context-curator viewer cookie\x00adm-1").hexdigest()
    assert value != hashlib.sha256(b"adm-1").hexdigest()
    assert value != cookie_value(b"adm-2")


@pytest.mark.parametrize(("prefix", "path"), [("", "/"), ("/curator", "/curator")])
def test_set_cookie_is_httponly_strict_and_scoped_to_the_viewer(prefix: str, path: str) -> None:
    name, value = set_cookie("adm-1", prefix)
    assert name == "set-cookie"
    assert value == (f"{COOKIE}={cookie_value(b'adm-1')}; Path={path}; HttpOnly; SameSite=Strict")
    assert "adm-1" not in value


@pytest.mark.parametrize(("prefix", "path"), [("", "/"), ("/curator", "/curator")])
def test_clear_cookie_empties_and_expires_it_on_the_same_path(prefix: str, path: str) -> None:
    assert clear_cookie(prefix) == (
        "set-cookie",
        f"{COOKIE}=; Path={path}; Max-Age=0; HttpOnly; SameSite=Strict",
    )


def test_a_cleared_cookie_lets_nobody_in(keys: AdminKeys) -> None:
    cleared = clear_cookie("")[1].split(";")[0]
    assert not keys.admits({"cookie": cleared})


# -- the login form ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"key=adm-1&next=/requests/a2", ("adm-1", "/requests/a2")),
        (b"next=%2Frequests%3Fstatus%3D500&key=a%2Bb+c", ("a+b c", "/requests?status=500")),
        (b"key=adm-1", ("adm-1", "")),
        (b"", ("", "")),
        (b"key=adm-1&next=//evil.example/x", ("adm-1", "")),
        (b"key=adm-1&next=https://evil.example/", ("adm-1", "")),
        (b"key=adm-1&next=%2F%0Aevil", ("adm-1", "")),
        (b"key=\xff\xfe&next=/r", ("\ufffd\ufffd", "/r")),
    ],
    ids=[
        "plain",
        "encoded",
        "no-next",
        "empty",
        "protocol-relative",
        "absolute",
        "newline",
        "bad-utf8",
    ],
)
def test_login_form(body: bytes, expected: tuple[str, str]) -> None:
    assert login_form(body) == expected


# -- where to go after login ---------------------------------------------------------------


@pytest.mark.parametrize(
    "target",
    ["/", "/requests", "/requests/a2?view=raw#top", "/curator/requests", "/a//b", "/a\\b"],
)
def test_same_site_paths_are_kept(target: str) -> None:
    assert safe_next(target) == target


@pytest.mark.parametrize(
    "target",
    [
        "",
        "requests",
        "//evil.example",
        "//evil.example/requests",
        "/\\evil.example",
        "https://evil.example/",
        "javascript:alert(1)",
        " /requests",
        "/requests\nSet-Cookie: x=1",
        "/\t/evil.example",  # browsers drop the tab: //evil.example
        "/\r\n/evil.example",
        "/caf\u00e9",  # not latin-1 safe as a header: was a 500
    ],
)
def test_anything_else_goes_to_the_start_page(target: str) -> None:
    assert safe_next(target) == ""


# -- same origin ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"sec-fetch-site": "same-origin"},
        {"sec-fetch-site": "none"},
        {"host": "127.0.0.1:9", "origin": "http://127.0.0.1:9"},
        {"host": "viewer.example", "origin": "https://viewer.example"},
        {"host": "127.0.0.1:9", "origin": "http://127.0.0.1:9", "sec-fetch-site": "same-origin"},
    ],
)
def test_a_post_from_the_viewers_own_page_or_no_browser_is_let_through(
    headers: dict[str, str],
) -> None:
    assert same_origin(headers)


@pytest.mark.parametrize(
    "headers",
    [
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
        {"sec-fetch-site": "cross-site", "host": "a", "origin": "http://a"},
        {"host": "127.0.0.1:9", "origin": "https://evil.example"},
        {"host": "127.0.0.1:9", "origin": "http://127.0.0.1:10"},
        {"host": "127.0.0.1:9", "origin": "http://127.0.0.1:9/"},
        {"host": "127.0.0.1:9", "origin": "null"},
        {"origin": "http://127.0.0.1:9"},  # no host to compare with
    ],
)
def test_a_post_from_another_site_is_refused(headers: dict[str, str]) -> None:
    assert not same_origin(headers)


# -- the login page ------------------------------------------------------------------------


def test_the_login_page_posts_the_key_and_the_target_to_the_prefix() -> None:
    page = str(login_page("/curator", "/requests/a2", failed=False))
    assert '<form method="post" action="/curator/login" class="login">' in page
    assert '<input type="hidden" name="next" value="/requests/a2">' in page
    assert 'name="key" type="password"' in page
    assert "not accepted" not in page


def test_a_failed_login_says_so() -> None:
    page = str(login_page("", "", failed=True))
    assert '<p class="error" role="alert">That key was not accepted.</p>' in page
    assert 'action="/login"' in page


def test_the_login_page_escapes_what_it_is_given() -> None:
    page = str(login_page('/p"><b>', '/r"><script>alert(1)</script>', failed=False))
    assert "<script>" not in page
    assert "<b>" not in page
    assert 'value="/r&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"' in page


# -- properties ----------------------------------------------------------------------------

printable_keys = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1)


@settings(max_examples=100, deadline=None)
@given(st.lists(printable_keys, min_size=1, max_size=4, unique=True), st.data())
def test_a_key_and_its_login_cookie_open_the_viewer_and_nothing_else_does(
    configured: list[str], data: st.DataObject
) -> None:
    keys = AdminKeys(configured)
    key = data.draw(st.sampled_from(configured))
    cookie = set_cookie(key, "/curator")[1].split(";")[0]
    assert HEX64.fullmatch(cookie.removeprefix(f"{COOKIE}="))
    assert keys.admits({"cookie": cookie})
    assert keys.admits(bearer(key))
    other = data.draw(printable_keys.filter(lambda k: k not in configured))
    assert not keys.accepts(other)
    assert not keys.admits(bearer(other))
    assert not keys.admits({"cookie": cookie_of(other)})


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=30))
def test_a_kept_target_is_a_same_site_path(target: str) -> None:
    kept = safe_next(target)
    assert kept in ("", target)
    if kept:
        assert kept.startswith("/")
        assert not kept.startswith(("//", "/\\"))
        assert kept.isascii()
        assert kept.isprintable()
        # What a browser makes of it once tabs and line breaks are dropped: still this site.
        assert not kept.replace("\t", "").replace("\r", "").replace("\n", "").startswith("//")
