"""`curator audit serve`: the audit web viewer over any audit store, without a proxy.

The store is found as the other `curator audit` subcommands find it (`--path`, else the
config's `audit:` section); the admin keys come from the config's `auth.admin_keys`. A
non-loopback `--host` without admin keys is refused: the pages show what clients sent.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import sys

from policies.errors import ConfigError
from policies.validate import Problems, Reader
from policies.yamlsrc import parse_file
from proxy.config.audit import masked_location
from proxy.config.auth import read_auth
from proxy.serving.admin import admin_listener
from proxy.viewer.app import Viewer
from proxy.viewer.auth import AdminKeys
from proxy.viewer.store import Target, opener

DEFAULT_PORT = 9465


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> argparse.ArgumentParser:
    serve = commands.add_parser(
        "serve", parents=[common], help="the audit web viewer (open the printed URL)"
    )
    serve.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any)"
    )
    return serve


def admin_keys(config: str | None) -> tuple[str, ...]:
    """`auth.admin_keys` of the config (only that section is read: a problem elsewhere in
    the file must not keep the viewer closed), or none without a config."""
    if config is None:
        return ()
    located = parse_file(config, env=os.environ)
    own = [p for p in located.problems if p.path == "auth" or p.path.startswith("auth.")]
    if own:
        raise ConfigError(own)
    data = located.data.get("auth") if isinstance(located.data, dict) else None
    if data is None:
        return ()
    read = Reader(Problems(config, located.lines, located.hidden))
    auth = read_auth(read, data, ("auth",))
    if read.problems.items:
        raise ConfigError(read.problems.items)
    return auth.admin_keys


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(store: Target, host: str, port: int, keys: tuple[str, ...]) -> int:
    """Serve the viewer until interrupted; prints the URL to open."""
    viewer = Viewer(opener(*store), AdminKeys(keys))
    path = masked_location(store[0])

    async def run() -> None:
        async with admin_listener(host, port, "", None, viewer=viewer) as server:
            bound = server.sockets[0].getsockname()
            shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
            note = " (admin key needed)" if keys else ""
            sys.stdout.write(f"audit viewer for {path}: http://{shown}:{bound[1]}/requests{note}\n")
            sys.stdout.flush()
            await asyncio.Event().wait()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        # admin_listener's own message names the proxy's `metrics.port`: not this command's.
        cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
        sys.stderr.write(
            f"curator audit: cannot listen on {host}:{port}: {cause.strerror or cause}\n"
        )
        return 1
    return 0
