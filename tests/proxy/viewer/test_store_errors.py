"""The viewer over a real PostgreSQL store, through the admin listener on a real port: input
the database refuses (a NUL byte in a filter or an id) is a 400 page, the database down a
503 page on every page that reads it, and both leave the listener serving."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.postgres_writer import PostgresSink
from proxy.serving.admin import admin_listener
from proxy.viewer.app import Viewer
from proxy.viewer.auth import AdminKeys
from proxy.viewer.store import opener
from tests.postgres import PgServer
from tests.proxy.viewer.records import entries

pytestmark = pytest.mark.e2e
READING = ("/requests", "/requests/a000000000", "/conversations/0123", "/overview")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def filled_dsn(fresh_dsn: str) -> str:
    builder = RecordBuilder(Redactor.build())
    sink = PostgresSink(fresh_dsn)
    sink.write_many([builder.build(e) for e in entries()])
    sink.close()
    return fresh_dsn


@pytest.fixture
async def admin(filled_dsn: str) -> AsyncIterator[httpx.AsyncClient]:
    viewer = Viewer(opener(filled_dsn), AdminKeys(()))
    async with admin_listener("127.0.0.1", 0, "/metrics", None, viewer=viewer) as server:
        port = server.sockets[0].getsockname()[1]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=20) as client:
            yield client


@pytest.fixture
def stopped(pg_server: PgServer) -> Iterator[PgServer]:
    pg_server.stop()
    try:
        yield pg_server
    finally:
        pg_server.start()


@pytest.mark.anyio
@pytest.mark.parametrize(
    "target",
    ["/requests?route=a%00b", "/requests?model=%00", "/requests/a0%00", "/requests/%00.json"],
)
async def test_a_nul_byte_the_database_refuses_is_a_400_page(
    admin: httpx.AsyncClient, target: str
) -> None:
    reply = await admin.get(target)
    assert reply.status_code == 400
    assert reply.headers["content-type"].startswith("text/html")
    assert "<h1>Bad request</h1>" in reply.text
    assert "NUL" in reply.text
    assert (await admin.get("/requests/a000000000")).status_code == 200  # still serving


@pytest.mark.anyio
async def test_the_database_down_is_a_503_page_on_every_page_that_reads_it(
    admin: httpx.AsyncClient, stopped: PgServer
) -> None:
    for target in READING:
        reply = await admin.get(target)
        assert reply.status_code == 503, target
        assert "<h1>The audit store is unavailable</h1>" in reply.text
        assert "postgres:" in reply.text
    assert (await admin.get("/static/viewer.css")).status_code == 200  # no store needed
    stopped.start()
    assert (await admin.get("/requests/a000000000")).status_code == 200  # back: served again
    stopped.stop()  # as the fixture left it
