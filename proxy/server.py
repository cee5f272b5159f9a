"""Run the proxy under uvicorn: uvloop + httptools when installed, N worker processes.

uvicorn's own `Server`/`Date` headers are off, so the upstream's reach the client
unchanged (and undoubled), and its access log is off: the app's exchange observers
(audit log, metrics) see every request instead. Worker processes cannot be handed a
Config object, so the parent puts the config file's path in `CURATOR_CONFIG_PATH` and
each worker rebuilds the app with `app_from_env` (no path: the built-in defaults, which
read the same environment).
"""

from __future__ import annotations

import gc
import logging
import os
from importlib.util import find_spec
from typing import Any

import uvicorn
from starlette.applications import Starlette

from policies.tokens import TokenCounter
from proxy.app import create_app, preload
from proxy.config import Config, default_config, load_config

log = logging.getLogger("curator.server")

CONFIG_ENV = "CURATOR_CONFIG_PATH"
GRACEFUL_SHUTDOWN_S = 30
"""On SIGTERM, in-flight requests (long streams included) get this long to finish."""


def uvicorn_options() -> dict[str, Any]:
    """The uvicorn settings the proxy runs with (tests' real-socket servers reuse them)."""
    return {
        "loop": "uvloop" if find_spec("uvloop") else "asyncio",
        "http": "httptools" if find_spec("httptools") else "h11",
        "lifespan": "on",
        "access_log": False,
        "server_header": False,
        "date_header": False,
        "log_config": None,
        "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_S,
    }


def build_app(config: Config) -> Starlette:
    """The production app for `config` (the one place serving assembles it)."""
    prepare_process(config)
    return create_app(config)


def prepare_process(config: Config) -> None:
    """Load the tokenizers, then move everything alive so far out of the GC's sight.

    tiktoken keeps each vocabulary as a 100k-200k entry dict, and every full collection
    walks them; startup objects live as long as the process anyway. Done here, not in
    the app, because freezing is a process-wide choice a library user should not inherit.
    """
    preload(TokenCounter(config.models))  # tiktoken caches encodings process-wide
    gc.collect()
    gc.freeze()


def app_from_env() -> Starlette:
    """uvicorn factory for worker processes: the config named by `CURATOR_CONFIG_PATH`."""
    # Spawned workers do not inherit the parent's logging setup; no-op if one exists.
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(message)s")
    path = os.environ.get(CONFIG_ENV)
    return build_app(load_config(path) if path else default_config())


def serve(
    config: Config,
    *,
    host: str | None = None,
    port: int | None = None,
    workers: int | None = None,
    config_path: str | None = None,
) -> None:
    """Serve until SIGINT/SIGTERM; arguments override the config's `server:` section."""
    host = host or config.server.host
    port = port if port is not None else config.server.port
    workers = workers or config.server.workers
    options = uvicorn_options()
    log.info(
        "context-curator listening on http://%s:%d (%d worker%s, config %s, %s + %s)",
        host,
        port,
        workers,
        "" if workers == 1 else "s",
        config.source,
        options["loop"],
        options["http"],
    )
    if workers == 1:
        uvicorn.run(build_app(config), host=host, port=port, **options)
        return
    if config_path:
        os.environ[CONFIG_ENV] = os.path.abspath(config_path)
    else:
        os.environ.pop(CONFIG_ENV, None)
    uvicorn.run(
        "proxy.server:app_from_env", factory=True, host=host, port=port, workers=workers, **options
    )
