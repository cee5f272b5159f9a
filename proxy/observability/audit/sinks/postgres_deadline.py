"""A client-side deadline on a PostgreSQL connection's calls.

A frozen server (SIGSTOP, a hung host behind a live kernel) leaves a call blocked on its
socket for good: the server's own `statement_timeout` is never enforced, its kernel still
acknowledges every packet (so TCP keepalives and `tcp_user_timeout` see nothing wrong), and
a cancel request is never read either. Past the deadline the socket is shut down from a
timer thread, which fails the blocked call at once; the sink reports that as unavailable.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

import psycopg


class Deadline:
    """Bounds calls on one connection at a time; `expired` says whether the last one ran out."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._running = False

    @contextlib.contextmanager
    def bound(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """Run the block; past `seconds`, `conn`'s socket is shut down under it."""
        self.expired = False
        with self._lock:
            self._running = True
        timer = threading.Timer(self.seconds, self._cut, args=(conn,))
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            with self._lock:
                self._running = False
            timer.cancel()

    def _cut(self, conn: psycopg.Connection[Any]) -> None:
        with self._lock:
            if not self._running:  # the block ended as the timer fired
                return
            self.expired = True
            # On a duplicate of the descriptor: shutdown acts on the socket itself, and the
            # connection's own descriptor stays for psycopg to close.
            with (
                contextlib.suppress(OSError, psycopg.Error),
                socket.socket(fileno=os.dup(conn.pgconn.socket)) as sock,
            ):
                sock.shutdown(socket.SHUT_RDWR)
