"""The sockets `curator serve` listens on, bound before anything says "listening": the client
port, and the admin listener's (`metrics.port`). A port that cannot be bound is one line
naming it (which setting, the address, the OS's reason) and exit status 1, whatever the
worker count; the workers never start.

The admin port with one worker is bound and listening here, then served by that process's
admin listener (`create_app(admin_socket=...)`). With `--workers N` each worker binds its
own with SO_REUSEPORT, so the kernel spreads scrapes over them (`proxy.serving.admin`); the
parent binds one the same way first and holds it, never listening, until it exits: the port
is checked before any worker starts, and no program that does not share it (SO_REUSEPORT,
same user) can take it from the workers while they start.
"""

from __future__ import annotations

import logging
import socket

from proxy.config.loader import Config
from proxy.serving.admin import admin_socket

log = logging.getLogger("curator.server")


def bind_listener(host: str, port: int) -> socket.socket:
    """The client port's socket, bound as uvicorn binds it; exits 1 saying what failed."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        log.error("cannot listen on %s:%d: %s", shown, port, exc.strerror or exc)
        raise SystemExit(1) from None
    sock.set_inheritable(True)  # worker processes serve it too
    return sock


def bind_admin(config: Config, workers: int) -> socket.socket | None:
    """The admin listener's socket (None: no `metrics.port`), as the module docstring says;
    exits 1 saying what failed."""
    metrics = config.metrics
    if not metrics.enabled or metrics.port is None:
        return None
    host = metrics.host or config.server.host
    try:
        return admin_socket(host, metrics.port, reuse_port=workers > 1, listen=workers == 1)
    except OSError as exc:
        log.error("%s", exc.strerror or exc)  # "metrics.port N: cannot listen on H: why"
        raise SystemExit(1) from None
