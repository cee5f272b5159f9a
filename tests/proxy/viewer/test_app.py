"""Every viewer page through `Viewer.handle`, on both store formats: content, escaping,
redaction, filters, deep links, and the admin-key rules."""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest

from proxy.viewer.app import Viewer
from proxy.viewer.auth import COOKIE, AdminKeys, cookie_value
from proxy.viewer.store import opener
from proxy.viewer.wire import Reply, ViewRequest
from tests.proxy.viewer.records import SECRET

KEY = "admin-key-1"


@pytest.fixture(params=["sqlite", "jsonl"])
def viewer(request: pytest.FixtureRequest, store_paths: tuple[Path, Path]) -> Viewer:
    db, lines = store_paths
    return Viewer(opener(str(db if request.param == "sqlite" else lines)), AdminKeys(()))


def get(viewer: Viewer, target: str, **headers: str) -> Reply:
    return viewer.handle(ViewRequest.parse("GET", target, headers))


def text(reply: Reply) -> str:
    return reply.body.decode()


def test_requests_lists_newest_first_with_links(viewer: Viewer) -> None:
    reply = get(viewer, "/requests")
    assert reply.status == 200
    page = text(reply)
    order = re.findall(r'data-id="([^"]+)"', page)
    assert order[0] == "d000000000"
    assert order[-1] == "a000000000"
    assert 'href="/requests/a200000000"' in page
    assert "token_budget &times;4" in page
    assert "102 → <strong>60</strong>" in page


def test_filters_narrow_the_list_and_stay_selected(viewer: Viewer) -> None:
    page = text(get(viewer, "/requests?route=chat&status=429"))
    assert re.findall(r'data-id="([^"]+)"', page) == ["d000000000"]
    assert '<option value="chat" selected>' in page
    page = text(get(viewer, "/requests?q=out+2&kind=chat"))
    assert re.findall(r'data-id="([^"]+)"', page) == ["a200000000"]
    bad = text(get(viewer, "/requests?status=ok&since=soon"))
    assert 'role="alert"' in bad


def test_script_in_a_message_is_text_everywhere(viewer: Viewer) -> None:
    for target in ("/requests/b1", "/requests/b1000", "/requests/b0"):
        page = text(get(viewer, target))
        assert "<script>alert" not in page
        assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page
        # The only scripts are the viewer's own file.
        assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/viewer.js">']


def test_a_url_cannot_inject_markup(viewer: Viewer) -> None:
    page = text(get(viewer, '/requests?route="><script>x</script>'))
    assert "<script>x" not in page
    page = text(get(viewer, "/requests/%3Cscript%3Ex"))
    assert "<script>x" not in page


def test_redacted_content_stays_redacted(viewer: Viewer) -> None:
    for target in ("/requests/b1", "/requests/b1.json", "/requests?q=key"):
        body = text(get(viewer, target))
        assert SECRET not in body
    assert "[REDACTED:openai_key]" in text(get(viewer, "/requests/b1"))


def test_request_page_shows_the_side_by_side_and_why(viewer: Viewer) -> None:
    page = text(get(viewer, "/requests/a200000000"))
    assert "Original: what the client sent (8 messages)" in page
    assert "Curated: what the upstream got (4 messages)" in page
    assert page.count('<tr class="dropped"') == 4
    assert page.count('<tr class="same"') == 4
    assert '<strong class="curator">token_budget</strong> drop: over' in page
    assert "x-curator-request-id" in page
    assert 'href="/requests/a200000000.json"' in page


def test_deep_links_take_an_id_prefix(viewer: Viewer) -> None:
    assert "Request <code" in text(get(viewer, "/requests/a2"))
    assert get(viewer, "/requests/a").status == 409  # three records start with "a"
    assert get(viewer, "/requests/zzz").status == 404


def test_raw_json_is_the_record(viewer: Viewer) -> None:
    reply = get(viewer, "/requests/a2.json")
    assert reply.content_type == "application/json"
    record = orjson.loads(reply.body)
    assert record["id"] == "a200000000"
    assert len(record["original"]) == 8


def test_conversation_page_orders_turns_and_charts_them(viewer: Viewer) -> None:
    page = text(get(viewer, "/requests/a0"))
    link = re.search(r'href="(/conversations/[0-9a-f]+)"', page)
    assert link is not None
    conv = text(get(viewer, link.group(1)))
    assert conv.index("/requests/a000000000") < conv.index("/requests/a200000000")
    assert "/requests/b0" not in conv
    assert conv.count('<rect class="before"') == 3
    assert conv.count('<rect class="after"') == 3
    assert '<polyline class="cached"' in conv


def test_overview_adds_up_the_range(viewer: Viewer) -> None:
    page = text(get(viewer, "/overview?since=2025-12-31T00:00:00Z"))
    assert '<span class="label">Requests</span><span class="value">7</span>' in page
    assert '<span class="label">Errors</span><span class="value">1</span>' in page
    assert "<th scope=row>agents</th><td>4</td>" in page
    assert "By policy" in page


def test_static_assets_and_security_headers(viewer: Viewer) -> None:
    css = get(viewer, "/static/viewer.css")
    assert css.status == 200
    assert css.content_type.startswith("text/css")
    headers = dict(css.all_headers())
    assert "script-src 'self'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert get(viewer, "/static/../app.py").status == 404


def test_only_get(viewer: Viewer) -> None:
    reply = viewer.handle(ViewRequest.parse("DELETE", "/requests", {}))
    assert reply.status == 405


def test_no_store_yet_is_a_page_not_a_crash(tmp_path: Path) -> None:
    reply = get(Viewer(opener(str(tmp_path / "none.db")), AdminKeys(())), "/requests")
    assert reply.status == 503
    assert "no audit records yet" in text(reply)


@pytest.fixture
def keyed(store_paths: tuple[Path, Path]) -> Viewer:
    return Viewer(opener(str(store_paths[0])), AdminKeys((KEY, "other-key")))


def test_keys_guard_every_page_and_asset(keyed: Viewer) -> None:
    for target in ("/requests", "/requests/a2", "/requests/a2.json", "/overview",
                   "/static/viewer.css", "/static/viewer.js", "/conversations/ab"):  # fmt: skip
        reply = get(keyed, target)
        assert reply.status == 401, target
        assert b"a200000000" not in reply.body
    assert get(keyed, "/requests", authorization="Bearer wrong").status == 401
    assert get(keyed, "/requests", authorization=f"Bearer {KEY}").status == 200
    assert get(keyed, "/requests", authorization="Bearer other-key").status == 200
    assert get(keyed, "/requests", cookie=f"{COOKIE}={cookie_value(KEY.encode())}").status == 200
    assert get(keyed, "/requests", cookie=f"{COOKIE}={KEY}").status == 401


def login(viewer: Viewer, body: str, **headers: str) -> Reply:
    headers = {
        "host": "127.0.0.1:9",
        "content-type": "application/x-www-form-urlencoded",
        **headers,
    }
    return viewer.handle(ViewRequest.parse("POST", "/login", headers, body.encode()))


def test_login_form_sets_a_strict_httponly_cookie(keyed: Viewer) -> None:
    page = text(get(keyed, "/requests/a2"))
    assert 'name="next" value="/requests/a2"' in page
    reply = login(keyed, f"key={KEY}&next=/requests/a2", origin="http://127.0.0.1:9")
    assert reply.status == 303
    headers = dict(reply.headers)
    assert headers["location"] == "/requests/a2"
    cookie = headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    assert KEY not in cookie
    value = cookie.split(";")[0]
    assert get(keyed, "/requests/a2", cookie=value).status == 200


def test_login_refuses_wrong_keys_other_sites_and_open_redirects(keyed: Viewer) -> None:
    assert login(keyed, "key=nope").status == 401
    assert login(keyed, f"key={KEY}", origin="https://evil.example").status == 403
    reply = login(keyed, f"key={KEY}&next=//evil.example/x")
    assert dict(reply.headers)["location"] == "/requests"
    assert login(keyed, "key=" + "x" * 5000).status == 413
