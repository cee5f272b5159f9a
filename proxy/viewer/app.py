"""`Viewer`: routes one request to a page, behind the admin keys.

URL scheme (under the viewer's prefix, empty on the admin listener):
`/requests` (filters as query parameters), `/requests/<id>` (a request id from the
`x-curator-request-id` header, or a unique prefix), `/requests/<id>.json` (the raw
record), `/conversations/<key>`, `/overview`, `/static/*`, `/login`, `/logout`.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib import resources
from typing import Any
from urllib.parse import unquote

import orjson
from markupsafe import Markup

from proxy.observability.audit.readers.query import (
    MAX_LIMIT,
    BadInput,
    Query,
    Reader,
    record_conversation,
)
from proxy.observability.audit.sinks.base import StoreUnavailable
from proxy.observability.exchange import new_id
from proxy.viewer import conversation_page, overview_page, request_page, requests_page
from proxy.viewer.auth import (
    AdminKeys,
    clear_cookie,
    login_form,
    login_page,
    safe_next,
    same_origin,
    set_cookie,
)
from proxy.viewer.layout import href, page
from proxy.viewer.wire import JSON, MAX_BODY_BYTES, TEXT, Reply, ViewRequest

log = logging.getLogger("curator.viewer")

OpenReader = Callable[[], Reader]
OVERVIEW_CAP = 20_000
"""Records the overview adds up at most (newest first)."""
REQUEST_ID = "x-curator-request-id"
STATIC = {"viewer.css": "text/css; charset=utf-8", "viewer.js": "text/javascript; charset=utf-8"}


class Viewer:
    """The audit viewer over the store `open_reader` opens (once per request: a reader is
    used by one thread, and the listeners answer from a thread pool)."""

    def __init__(self, open_reader: OpenReader, admin_keys: AdminKeys, *, prefix: str = "") -> None:
        self.open_reader = open_reader
        self.keys = admin_keys
        self.prefix = prefix.rstrip("/")

    def handle(self, request: ViewRequest) -> Reply:
        """The reply to one request; never raises. A store that is missing or down is a 503
        page, input the store refuses (`BadInput`) a 400, and anything else (a bug) a 500
        naming a request id, which the log's traceback names too."""
        try:
            return self._handle(request)
        except Exception:
            rid = new_id()
            log.exception("viewer: %s %s failed, request id %s", request.method, request.path, rid)
            main = Markup(
                "<h1>Internal error</h1><p>The viewer failed to answer. The proxy's log has "
                "the details under request id <code>{}</code>.</p>"
            ).format(rid)
            reply = self._page(500, "Internal error", main)
            return Reply(reply.status, reply.body, reply.content_type, ((REQUEST_ID, rid),))

    def _handle(self, request: ViewRequest) -> Reply:
        if request.path in ("/login", "/logout"):
            return self._session(request)
        if request.method not in ("GET", "HEAD"):
            return Reply(405, b"the viewer is read-only: GET only\n", TEXT, (("allow", "GET"),))
        if not self.keys.admits(request.headers):
            return self._unauthorized(request)
        try:
            return self._route(request)
        except FileNotFoundError as exc:
            return self._page(
                503, "No audit store", Markup("<h1>No audit store</h1><p>{}</p>").format(exc)
            )
        except BadInput as exc:
            return self._page(
                400, "Bad request", Markup("<h1>Bad request</h1><p>{}</p>").format(exc)
            )
        except StoreUnavailable as exc:
            log.warning("viewer: the audit store is unavailable: %s", exc)
            return self._page(
                503,
                "Store unavailable",
                Markup(
                    "<h1>The audit store is unavailable</h1><p>{}</p>"
                    "<p>Try again once it is back.</p>"
                ).format(exc),
            )
        except sqlite3.DatabaseError as exc:
            log.warning("viewer: cannot read the audit store: %s", exc)
            return self._page(
                503,
                "Store error",
                Markup("<h1>Cannot read the audit store</h1><p>{}</p>").format(exc),
            )

    def _route(self, request: ViewRequest) -> Reply:
        path = request.path
        if path in ("/", ""):
            return Reply(303, b"", TEXT, (("location", self.prefix + "/requests"),))
        if path == "/requests":
            return self._requests(request)
        if path.startswith("/requests/"):
            return self._request(unquote(path.removeprefix("/requests/")))
        if path.startswith("/conversations/"):
            return self._conversation(unquote(path.removeprefix("/conversations/")))
        if path == "/overview":
            return self._overview(request)
        if path.startswith("/static/") and path.removeprefix("/static/") in STATIC:
            name = path.removeprefix("/static/")
            data = resources.files("proxy.viewer").joinpath("static", name).read_bytes()
            return Reply(200, data, STATIC[name])
        return self._not_found("No such page.")

    @contextmanager
    def _reader(self) -> Iterator[Reader]:
        reader = self.open_reader()
        try:
            yield reader
        finally:
            reader.close()

    def _requests(self, request: ViewRequest) -> Reply:
        problem = None
        try:
            query = requests_page.parse_query(request.query)
        except requests_page.BadQuery as exc:
            problem, query = str(exc), Query(limit=requests_page.PAGE_SIZE)
        with self._reader() as reader:
            found = reader.search(query)
            facets = reader.facets()
        main = requests_page.render(
            found, request.query, facets, prefix=self.prefix, problem=problem
        )
        return self._page(200, "Requests", main, section="requests")

    def _request(self, rid: str) -> Reply:
        raw = rid.endswith(".json")
        rid = rid.removesuffix(".json") if raw else rid
        try:
            with self._reader() as reader:
                record = reader.get(rid)
                children = [] if record is None else _children(reader, record)
        except LookupError as exc:
            return self._page(
                409, "Ambiguous id", Markup("<h1>Ambiguous id</h1><p>{}</p>").format(exc)
            )
        if record is None:
            return self._not_found(f"No audit record with id {rid!r}.")
        if raw:
            body = orjson.dumps(record, option=orjson.OPT_INDENT_2)
            return Reply(200, body, JSON, (("content-disposition", "inline"),))
        key = record_conversation(record)
        main = request_page.render(record, key, prefix=self.prefix, children=children)
        return self._page(200, f"Request {str(record.get('id'))[:12]}", main, section="requests")

    def _conversation(self, key: str) -> Reply:
        with self._reader() as reader:
            found = reader.search(Query(conversation=key, limit=MAX_LIMIT))
        turns = list(reversed(found.rows))
        main = conversation_page.render(key, turns, prefix=self.prefix, more=found.more)
        return self._page(200, "Conversation", main, section="requests")

    def _overview(self, request: ViewRequest) -> Reply:
        params = dict(request.query)
        params.setdefault("since", "7d")
        problem = None
        try:
            base = requests_page.parse_query(
                {k: params[k] for k in ("since", "until") if k in params}, limit=MAX_LIMIT
            )
        except requests_page.BadQuery as exc:
            problem, base = str(exc), Query(limit=MAX_LIMIT)
        rows, capped = [], False
        with self._reader() as reader:
            offset = 0
            while True:
                found = reader.search(
                    Query(since=base.since, until=base.until, limit=MAX_LIMIT, offset=offset)
                )
                rows.extend(found.rows)
                offset += len(found.rows)
                if not found.more or not found.rows:
                    break
                if offset >= OVERVIEW_CAP:
                    capped = True
                    break
        total, groups = overview_page.tally(rows)
        main = overview_page.render(
            total, groups, params, prefix=self.prefix, capped=capped, problem=problem
        )
        return self._page(200, "Overview", main, section="overview")

    def _session(self, request: ViewRequest) -> Reply:
        if request.path == "/logout":
            return Reply(
                303, b"", TEXT, (("location", self.prefix + "/login"), clear_cookie(self.prefix))
            )
        if request.method == "POST":
            return self._login(request)
        if request.method not in ("GET", "HEAD"):
            return Reply(405, b"method not allowed\n", TEXT, (("allow", "GET, POST"),))
        target = safe_next(request.query.get("next", ""))
        return self._page(
            200, "Sign in", login_page(self.prefix, target, failed=False), signed_in=False
        )

    def _login(self, request: ViewRequest) -> Reply:
        if not same_origin(request.headers):
            return Reply(403, b"cross-site login refused\n", TEXT)
        if len(request.body) > MAX_BODY_BYTES:
            return Reply(413, b"login form too large\n", TEXT)
        key, target = login_form(request.body)
        if not self.keys or not self.keys.accepts(key):
            main = login_page(self.prefix, target, failed=True)
            return self._page(401, "Sign in", main, signed_in=False)
        location = target or self.prefix + "/requests"
        return Reply(303, b"", TEXT, (("location", location), set_cookie(key, self.prefix)))

    def _unauthorized(self, request: ViewRequest) -> Reply:
        challenge = ("www-authenticate", 'Bearer realm="curator viewer"')
        if request.path.startswith("/static/") or request.path.endswith(".json"):
            return Reply(401, b"an admin key is needed\n", TEXT, (challenge,))
        target = href(self.prefix, request.path, request.query)
        main = login_page(self.prefix, target, failed=False)
        reply = self._page(401, "Sign in", main, signed_in=False)
        return Reply(reply.status, reply.body, reply.content_type, (challenge,))

    def _not_found(self, what: str) -> Reply:
        return self._page(404, "Not found", Markup("<h1>Not found</h1><p>{}</p>").format(what))

    def _page(
        self,
        status: int,
        title: str,
        main: Markup,
        *,
        section: str = "",
        signed_in: bool | None = None,
    ) -> Reply:
        signed = bool(self.keys) if signed_in is None else signed_in
        return Reply(
            status, page(title, main, prefix=self.prefix, section=section, signed_in=signed)
        )


def _children(reader: Reader, record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The records of calls made on `record`'s behalf (a subcall has none)."""
    if record.get("parent_id") or not record.get("id"):
        return []
    return reader.search(Query(parent=str(record["id"]), limit=MAX_LIMIT)).rows
