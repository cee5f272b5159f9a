"""Run an ASGI app under real uvicorn on a loopback port, in a background thread.

The socket is bound here (port 0) before uvicorn starts, so the port is known at once and
no two servers can race for one. `stop()` asks uvicorn to exit and joins the thread, so
no server outlives its fixture.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import uvicorn
from starlette.types import ASGIApp

HOST = "127.0.0.1"
START_TIMEOUT_S = 20.0


class ServerThread:
    """A uvicorn server on 127.0.0.1:<free port>, started with `with` or `start()`."""

    def __init__(self, app: ASGIApp, **options: Any) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((HOST, 0))
        self.port: int = self._sock.getsockname()[1]
        settings: dict[str, Any] = {
            "log_level": "warning",
            "loop": "asyncio",
            "log_config": None,
            "timeout_graceful_shutdown": 3,
        }
        settings.update(options)
        self._server = uvicorn.Server(uvicorn.Config(app, **settings))
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def origin(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> ServerThread:
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"uvicorn did not start on port {self.port}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=START_TIMEOUT_S)
        self._sock.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@contextmanager
def full_accept_queue() -> Iterator[int]:
    """The port of a listener whose accept queue is full: the kernel drops new SYNs, so a
    connect to it hangs until the client's connect timeout."""
    with socket.create_server((HOST, 0), backlog=0) as listener:
        port = listener.getsockname()[1]
        fillers = []
        try:
            for _ in range(4):  # more than the queue holds
                filler = socket.socket()
                filler.setblocking(False)
                filler.connect_ex((HOST, port))
                fillers.append(filler)
            yield port
        finally:
            for filler in fillers:
                filler.close()
