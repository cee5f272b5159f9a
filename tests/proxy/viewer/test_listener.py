"""The viewer on real sockets: mounted on the proxy's admin listener (beside /metrics, behind
the admin keys), absent from the client port, and served by `curator audit serve`."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from policies.errors import ConfigError
from proxy.config.loader import load_config
from proxy.serving.app import create_app
from tests.browser.traffic import ADMIN_KEY, MODEL, WINDOW, Traffic, proxied_traffic, write_config
from tests.fakes.servers import ServerThread
from tests.fakes.upstream import FakeOpenAI

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).parents[3]


@pytest.fixture(scope="module")
def fake_server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI(windows={MODEL: WINDOW, "gpt-4o": 128_000, "gpt-4o-mini": 128_000})
    with ServerThread(fake.app) as server:
        fake.origin = server.origin
        yield fake


@pytest.fixture(scope="module")
def traffic(fake_server: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traffic]:
    with proxied_traffic(tmp_path_factory.mktemp("listener"), fake_server, keys=True) as filled:
        yield filled


def test_admin_listener_serves_the_viewer_behind_the_admin_keys(traffic: Traffic) -> None:
    with httpx.Client(base_url=traffic.admin_origin, timeout=10) as admin:
        assert admin.get("/metrics").status_code == 200  # scrapes need no admin key
        denied = admin.get("/requests")
        assert denied.status_code == 401
        assert denied.headers["www-authenticate"].startswith("Bearer")
        assert traffic.ids["curated"] not in denied.text
        assert admin.get("/static/viewer.css").status_code == 401
        bearer = {"authorization": f"Bearer {ADMIN_KEY}"}
        listed = admin.get("/requests", headers=bearer)
        assert listed.status_code == 200
        assert traffic.ids["curated"] in listed.text
        assert "default-src 'none'" in listed.headers["content-security-policy"]
        page = admin.get(f"/requests/{traffic.ids['curated']}", headers=bearer)
        assert "tool_result_truncation" in page.text
        head = admin.head(f"/requests/{traffic.ids['curated']}", headers=bearer)
        assert head.status_code == 200
        assert head.content == b""
        assert admin.post("/requests", headers=bearer).status_code == 405


def test_login_cookie_over_the_wire(traffic: Traffic) -> None:
    with httpx.Client(base_url=traffic.admin_origin, timeout=10) as admin:
        reply = admin.post("/login", data={"key": ADMIN_KEY, "next": "/overview"})
        assert reply.status_code == 303
        assert reply.headers["location"] == "/overview"
        assert "HttpOnly" in reply.headers["set-cookie"]
        assert admin.get("/overview").status_code == 200  # the client kept the cookie
        admin.get("/logout")
        assert admin.get("/overview").status_code == 401


def test_the_client_port_does_not_serve_the_viewer(traffic: Traffic) -> None:
    bearer = {"authorization": f"Bearer {ADMIN_KEY}"}
    with httpx.Client(base_url=traffic.proxy_origin, timeout=10) as client:
        for path in ("/requests", f"/requests/{traffic.ids['curated']}", "/curator/requests",
                     "/static/viewer.css", "/overview"):  # fmt: skip
            reply = client.get(path, headers=bearer)
            assert reply.status_code == 404, path
            assert traffic.ids["curated"] not in reply.text


def test_audit_serve_prints_a_url_that_opens(traffic: Traffic, tmp_path: Path) -> None:
    config = write_config(tmp_path, "http://127.0.0.1:9", 9, keys=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "proxy.cli", "audit", "serve", "--config", str(config),
               "--path", str(traffic.db), "--port", "0"]  # fmt: skip
    with subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith(f"audit viewer for {traffic.db}: http://127.0.0.1:")
            url = line.split(": ", 1)[1].split()[0]
            assert url.endswith("/requests")
            assert httpx.get(url, timeout=10).status_code == 401
            bearer = {"authorization": f"Bearer {ADMIN_KEY}"}
            shown = httpx.get(f"{url}/{traffic.ids['script']}", headers=bearer, timeout=10)
            assert "&lt;script&gt;" in shown.text
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def test_audit_serve_refuses_a_public_host_without_keys(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    db.write_bytes(b"")
    command = [sys.executable, "-m", "proxy.cli", "audit", "serve", "--path", str(db),
               "--host", "0.0.0.0", "--port", "0"]  # fmt: skip
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=30,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert done.returncode == 1
    assert "set auth.admin_keys" in done.stderr


def public_config(folder: Path, db: Path, *, admin: bool) -> Path:
    path = folder / "public.yaml"
    admin_keys = f'admin_keys: ["{ADMIN_KEY}"]' if admin else ""
    path.write_text(
        f"""
upstreams: {{fake: {{base_url: "http://127.0.0.1:9/v1"}}}}
routes: [{{name: default, upstream: fake, policy: chat}}]
policies: {{chat: preset:chat}}
audit: {{path: "{db}"}}
auth: {{keys: ["client-key"], {admin_keys}}}
viewer: {{public: true}}
"""
    )
    return path


def test_public_viewer_on_the_client_port_needs_admin_keys(
    traffic: Traffic, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=r"viewer\.public: needs auth\.admin_keys"):
        load_config(public_config(tmp_path, traffic.db, admin=False))
    app = create_app(load_config(public_config(tmp_path, traffic.db, admin=True)))
    with ServerThread(app) as server, httpx.Client(base_url=server.origin, timeout=10) as client:
        denied = client.get("/curator/requests")
        assert denied.status_code == 401
        assert "Sign in" in denied.text  # the viewer's own answer, not invalid_proxy_key
        bearer = {"authorization": f"Bearer {ADMIN_KEY}"}
        page = client.get(f"/curator/requests/{traffic.ids['curated']}", headers=bearer)
        assert page.status_code == 200
        assert 'href="/curator/static/viewer.css"' in page.text
        assert client.get("/curator/static/viewer.js", headers=bearer).status_code == 200
        login = client.post("/curator/login", data={"key": ADMIN_KEY})
        assert login.headers["location"] == "/curator/requests"
        assert "Path=/curator" in login.headers["set-cookie"]
        assert client.get("/v1/models", headers=bearer).status_code == 401  # not a proxy key
