"""Run the proxy under uvicorn: uvloop + httptools when installed, N worker processes.

uvicorn's own `Server`/`Date` headers are off, so the upstream's reach the client
unchanged (and undoubled), and its access log is off: the app's exchange observers
(audit log, metrics) see every request instead. Worker processes cannot be handed a
Config object, so the parent puts the config file's path in `CURATOR_CONFIG_PATH` and
each worker rebuilds the app with `app_from_env` (no path: the built-in defaults, which
read the same environment); `--host` travels the same way, in `CURATOR_LISTEN_HOST`.

Metrics with `--workers N` use prometheus-client's multiprocess mode: before any worker
starts, the parent points PROMETHEUS_MULTIPROC_DIR at an empty directory (`metrics.
multiprocess_dir`, else an already set PROMETHEUS_MULTIPROC_DIR, else a fresh temp dir it
removes on exit). Workers are spawned, so they import prometheus_client with it set.

Connections are served by `proxy.serving.connection_guard` (head size, header and body
timeouts, max connections) around uvicorn's httptools parser. The listening socket is bound before
anything says "listening", and so is the admin listener's (`metrics.port`): a port in use
is reported in one line with its setting, address and the OS error, and the process exits 1
(`proxy.serving.listeners`). A worker that fails to start exits 3 (uvicorn's status), and so
does the parent, whatever the worker count.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from importlib.util import find_spec
from types import FrameType
from typing import Any, NoReturn

import uvicorn
from starlette.applications import Starlette

from policies.tokens import TokenCounter
from proxy.config.limits import Limits
from proxy.config.loader import Config, default_config, load_config
from proxy.observability.metrics.multiproc import MULTIPROC_ENV, prepare_multiprocess_dir
from proxy.observability.observers import viewer_notice
from proxy.priority import shorten_slice
from proxy.serving.app import create_app
from proxy.serving.conn_limits import check_fd_budget, conn_limits, raise_fd_limit
from proxy.serving.edge import preload
from proxy.serving.listeners import bind_admin, bind_listener
from proxy.serving.reload import serve_workers
from proxy.serving.slim import release_rs_bpe_pages, slim_tiktoken

SWITCH_INTERVAL_S = 0.0005
"""How long a thread may keep the GIL while another waits for it (Python's default: 5 ms).
Big bodies are curated in a thread, the audit and spend figures are built in others; each
time one holds the GIL the event loop waits, and a small streaming turn needs the loop
several times before its first byte. At 5 ms, small turns' time to first byte went from
p99 ~9 ms idle to ~50 ms while two clients sent cold 127k-token bodies; at 0.5 ms it stays
within a few ms of idle (`bench.hol`), with no measurable cost to small-request throughput."""

log = logging.getLogger("curator.server")

CONFIG_ENV = "CURATOR_CONFIG_PATH"
HOST_ENV = "CURATOR_LISTEN_HOST"
GC_YOUNG_THRESHOLD = 10_000
"""Net new container objects before a young-generation collection (CPython's default:
700). Each collection walks every live young object, and 32 requests in flight hold more
than 700 (parsed bodies, aiohttp and ASGI state), so at the default one ran every ~9
requests and cost ~20 us of CPU per request (measured: 245 -> 220 us per small proxied
request). Garbage cycles are rare here, so the memory this defers stays small."""
GRACEFUL_SHUTDOWN_S = 30
"""On SIGTERM, in-flight requests (long streams included) get this long to finish."""


STARTUP_FAILURE = 3
"""uvicorn's exit status when the app fails to start."""


def uvicorn_options(limits: Limits | None = None) -> dict[str, Any]:
    """The uvicorn settings the proxy runs with (tests' real-socket servers reuse them)."""
    limits = limits or Limits()
    return {
        "loop": "uvloop" if find_spec("uvloop") else "asyncio",
        "http": _http_protocol(limits),
        # Only without httptools (uvicorn[standard] ships it): h11 answers 400 over this.
        "h11_max_incomplete_event_size": limits.max_header_kb * 1024,
        "lifespan": "on",
        "access_log": False,
        "server_header": False,
        "date_header": False,
        "log_config": None,
        "timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_S,
        # WebSocket messages as they are on the wire, bounded (see Limits.max_ws_message_mb).
        "ws_max_size": limits.max_ws_message_bytes,
        "ws_per_message_deflate": False,
    }


def _http_protocol(limits: Limits) -> Any:
    if not find_spec("httptools"):
        return "h11"
    from proxy.serving.connection_guard import GuardedHttpToolsProtocol  # imports httptools

    # A partial, not a class made here: worker processes receive it pickled.
    return functools.partial(GuardedHttpToolsProtocol, limits=conn_limits(limits))


def build_app(config: Config, *, admin_socket: socket.socket | None = None) -> Starlette:
    """The production app for `config` (the one place serving assembles it), its admin
    listener on `admin_socket` when given (`proxy.serving.listeners.bind_admin`)."""
    prepare_process(config)
    return create_app(config, on_started=worker_started, admin_socket=admin_socket)


def prepare_process(config: Config) -> None:
    """Load the tokenizers (and give back what they needed only to load: `proxy.serving.slim`)
    and make young collections rarer (`GC_YOUNG_THRESHOLD`). What startup made leaves the
    GC's sight once the app has started (`freeze_survivors`).

    Done here, not in the app, because these are process-wide choices a library user
    should not inherit.
    """
    preload(TokenCounter(config.models))  # tokenizers are cached process-wide
    slim_tiktoken()
    release_rs_bpe_pages()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def worker_started() -> None:
    """On the worker's event loop thread, once its app has started: `freeze_survivors`,
    and short scheduler slices for the loop thread alone (`proxy.priority.shorten_slice`:
    it then takes the core from a background thread as soon as it wakes)."""
    freeze_survivors()
    slice_ns = shorten_slice()
    log.debug("event loop thread's scheduler slice: %s ns", slice_ns or "the default")


def freeze_survivors() -> None:
    """Collect, then move every object still alive out of the garbage collector's sight
    for good: once the app's lifespan has opened the worker's caches, before any request
    (`create_app(on_started=...)`).

    Startup objects live as long as the process, and a full collection walks each one,
    every thread stopped meanwhile, the event loop too: tiktoken's vocabularies (100k-200k
    entry dicts), and the caches' containers, which after an agent's big histories hold
    tens of thousands of entries (the token counter's LRUs, the audit's message cache).
    In a worker after the bench's never-seen 127k-token bodies a full collection took
    13-28 ms with the caches not frozen, 0.1-2.8 ms with them. Frozen objects are
    still freed when their last reference goes; only cycles among them would stay, and
    the cache entries (digests, counts, tuples of them) form none. A cache a config
    reload makes (a new `models:` table) is not frozen: a reload runs beside requests,
    whose objects must stay collectable.
    """
    gc.collect()
    gc.freeze()


def app_from_env() -> Starlette:
    """uvicorn factory for worker processes: the config named by `CURATOR_CONFIG_PATH`."""
    # Spawned workers do not inherit the parent's logging setup; no-op if one exists.
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(message)s")
    path = os.environ.get(CONFIG_ENV)
    config = load_config(path) if path else default_config()
    return build_app(listening_on(config, os.environ.get(HOST_ENV)))


def listening_on(config: Config, host: str | None) -> Config:
    """`config` with `--host` applied (the admin listener's default interface follows it)."""
    if not host or host == config.server.host:
        return config
    return dataclasses.replace(config, server=dataclasses.replace(config.server, host=host))


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
    raise_fd_limit()  # before the limits are sized from it; workers inherit it
    sys.setswitchinterval(SWITCH_INTERVAL_S)  # see its docstring
    limits = config.server.limits
    options = uvicorn_options(limits)
    options["timeout_graceful_shutdown"] = limits.shutdown_grace_s
    check_fd_budget(conn_limits(limits))
    # uvicorn re-raises the SIGTERM it shut down on once it is done; exit 0 then, not as
    # a process killed by SIGTERM (143). Before uvicorn starts, SIGTERM exits at once.
    signal.signal(signal.SIGTERM, _exit_zero)
    sock = bind_listener(host, port)
    admin = bind_admin(listening_on(config, host), workers)
    log.info(
        "context-curator listening on http://%s:%d (%d worker%s, config %s, %s + %s)",
        host,
        port,
        workers,
        "" if workers == 1 else "s",
        config.source,
        options["loop"],
        "httptools" if options["http"] != "h11" else "h11",
    )
    if (notice := viewer_notice(config, host, port)) is not None:
        log.info("%s", notice)
    with sock, admin or nullcontext(), multiprocess_metrics(config, workers):
        if workers == 1:
            app = build_app(listening_on(config, host), admin_socket=admin)
            server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, **options))
            with suppress(KeyboardInterrupt):  # as uvicorn.run: Ctrl-C is a clean stop
                server.run(sockets=[sock])
            if not server.started:
                raise SystemExit(STARTUP_FAILURE)
            return
        _serve_workers(host, port, workers, options, config_path, sock)


def _exit_zero(_signum: int, _frame: FrameType | None) -> NoReturn:
    raise SystemExit(0)


def _serve_workers(
    host: str,
    port: int,
    workers: int,
    options: dict[str, Any],
    config_path: str | None,
    sock: socket.socket,
) -> None:
    if config_path:
        os.environ[CONFIG_ENV] = os.path.abspath(config_path)
    else:
        os.environ.pop(CONFIG_ENV, None)
    os.environ[HOST_ENV] = host
    # As uvicorn.run does, except that SIGHUP reloads every worker in place (proxy.serving.reload).
    serve_workers(
        uvicorn.Config(
            "proxy.serving.server:app_from_env",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            **options,
        ),
        sock,
    )


@contextmanager
def multiprocess_metrics(config: Config, workers: int) -> Iterator[str | None]:
    """Set up PROMETHEUS_MULTIPROC_DIR for `workers` (see the module docstring)."""
    preset = os.environ.get(MULTIPROC_ENV)
    if not config.metrics.enabled or (workers == 1 and not preset):
        yield None
        return
    # One process: prometheus_client was imported with whatever the environment said.
    chosen = preset if workers == 1 else config.metrics.multiprocess_dir or preset
    path = chosen or tempfile.mkdtemp(prefix="curator-metrics-")
    prepare_multiprocess_dir(path)
    os.environ[MULTIPROC_ENV] = path
    try:
        yield path
    finally:
        if chosen is None:
            shutil.rmtree(path, ignore_errors=True)
