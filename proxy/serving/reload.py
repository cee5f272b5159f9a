"""Hot reload: a changed config is validated in full, then swapped in with one assignment.

Triggers: a change to the config file or to any policy file it names (polled every
`interval_s`: mtime, size and inode, so editors that rename a new file into place and
Kubernetes ConfigMap symlink swaps are seen too), and SIGHUP. With `--workers N` every
worker watches the files itself, and the parent forwards SIGHUP to each serving worker
(`serve_workers`), so each one reloads in place and keeps its caches.

The app state holds a `Live` box; each exchange reads `live.current` once at its start,
so a request in flight finishes on the edge (config, routes, policies, upstream table) it
started with. A reload replaces routes, policies, upstreams and models; everything else
(server, audit, metrics, ...) needs a restart, and a change there is logged and ignored.
An invalid config changes nothing: every problem is logged as `file:line: key.path:
problem` and the attempt is counted through `on_reload("error", None)`. Summary caches a
reload opens (a new redis URL) stay open until shutdown.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import socket
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Literal, TypeVar

from policies.errors import ConfigError
from policies.models import ModelTable
from policies.summary_io import SummaryCache
from policies.tokens import TokenCounter
from proxy.config.loader import (
    Config,
    ConfigFileError,
    FileStamp,
    file_stamp,
    load_config,
)
from proxy.curation.plan import CurationSetup

if TYPE_CHECKING:
    import uvicorn
    from uvicorn.supervisors.multiprocess import Process

    from proxy.serving.edge import Edge

log = logging.getLogger("curator.reload")

WATCH_INTERVAL_S = 1.0
RELOADABLE = frozenset({"source", "sources", "upstreams", "policies", "routes", "models"})
"""Config fields a reload replaces; any other section keeps its running value."""

Result = Literal["ok", "error"]
OnReload = Callable[[Result, Config | None], None]
"""Called after every reload attempt: ("ok", the new config) or ("error", None). The
metrics count it, and take the new config's route and policy names as label values."""
CounterFor = Callable[[ModelTable], TokenCounter]
Stamps = dict[str, FileStamp | None]
T = TypeVar("T")


@dataclass(slots=True)
class Live(Generic[T]):
    """What every new exchange reads once at its start; a reload replaces it whole."""

    current: T


class Reloader:
    """Reloads the config behind a `Live[Edge]`: on demand, on file changes, on SIGHUP."""

    def __init__(
        self,
        live: Live[Edge],
        *,
        on_reload: OnReload | None = None,
        counter_for: CounterFor = TokenCounter,
    ) -> None:
        self.live = live
        self._on_reload = on_reload
        self._counter_for = counter_for
        self._lock = asyncio.Lock()
        self._seen: Stamps = dict(live.current.config.sources)
        """Each watched file's stamp as of the read the running config (or the last failed
        attempt) made: a worker that reads its config, then misses an edit while starting,
        still sees the change on its first poll."""
        self._stack = AsyncExitStack()
        """Closes the summary caches that reloads open, at shutdown."""
        self._tasks: set[asyncio.Task[Result]] = set()

    @property
    def enabled(self) -> bool:
        """False for a config not read from a file (built-in defaults, tests)."""
        return bool(self._seen)

    async def reload(self, trigger: str) -> Result:
        """Load, validate and swap in the config; on any problem keep the running one."""
        async with self._lock:
            edge = self.live.current
            try:
                config = await asyncio.to_thread(load_config, edge.config.source)
            except ConfigError as exc:
                if isinstance(exc, ConfigFileError):
                    # Also watch what the failed attempt read, so fixing it is noticed.
                    self._seen = {**self._seen, **exc.sources}
                for problem in exc.problems:
                    log.error(
                        "config reload (%s) rejected, keeping the running config: %s",
                        trigger,
                        problem,
                    )
                return self._count("error", None)
            self._seen = dict(config.sources)
            try:
                config = _keep_restart_only(edge.config, config)
                self.live.current = await self._derive(edge, config)
            except Exception:
                log.exception("config reload (%s) failed, keeping the running config", trigger)
                return self._count("error", None)
            log.info("config reloaded from %s (%s, pid %d)", config.source, trigger, os.getpid())
            return self._count("ok", config)

    async def watch(self, interval_s: float) -> None:
        """Poll the watched files; reload once a change has stopped changing for one poll."""
        pending: Stamps | None = None
        while True:
            await asyncio.sleep(interval_s)
            now = {path: file_stamp(path) for path in self._seen}
            if now == self._seen:
                pending = None
            elif now != pending:
                pending = now  # still being written, perhaps: look again next time
            else:
                pending = None
                await self.reload("file change")

    def _count(self, result: Result, config: Config | None) -> Result:
        if self._on_reload is not None:
            try:
                self._on_reload(result, config)
            except Exception:  # a metrics bug must not undo a reload
                log.exception("on_reload hook failed")
        return result

    async def _derive(self, edge: Edge, config: Config) -> Edge:
        """`edge` serving `config`; the client, observers and limits stay."""
        old = edge.curation
        if config.models == old.config.models:
            # Counts cached so far stay valid.
            setup = CurationSetup(
                config, old.counter, old.loaded, old.offload, old.facts, tools=old.tools
            )
        else:
            counter = self._counter_for(config.models)
            setup = CurationSetup(
                config, counter, offload=old.offload, facts=old.facts, tools=old.tools
            )
        if old.facts is not None:  # the upstreams' model lists, read again in the background
            old.facts.windows.refresh(edge.client, config.upstreams.values())
        return edge.serving(config, setup, await self._caches(config, edge.caches))

    async def _caches(
        self, config: Config, current: Mapping[str, SummaryCache]
    ) -> Mapping[str, SummaryCache]:
        """The summary caches `config` names: the running ones where the spec is unchanged."""
        if not any(p.is_async for p in config.policies.values()):
            return {}
        from proxy.summarizing.services import (  # its redis client loads only when needed
            cache_specs,
            close_cache,
            new_cache,
        )

        caches: dict[str, SummaryCache] = {}
        for spec in cache_specs(config):
            if spec in current:
                caches[spec] = current[spec]
            else:
                caches[spec] = cache = new_cache(spec)
                self._stack.push_async_callback(close_cache, cache)
        return caches

    def _on_sighup(self) -> None:
        if not self.enabled:
            log.info("SIGHUP: running on built-in defaults (no config file), nothing to reload")
            return
        task = asyncio.get_running_loop().create_task(self.reload("SIGHUP"))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @asynccontextmanager
    async def running(self, interval_s: float | None) -> AsyncIterator[Reloader]:
        """Watch files (unless `interval_s` is None) and handle SIGHUP until exit."""
        async with self._stack:
            watcher = None
            if self.enabled and interval_s is not None:
                watcher = asyncio.get_running_loop().create_task(self.watch(interval_s))
            hup = _add_sighup(self._on_sighup)
            try:
                yield self
            finally:
                if hup is not None:
                    asyncio.get_running_loop().remove_signal_handler(hup)
                for task in (watcher, *self._tasks):
                    if task is not None:
                        task.cancel()
                        with suppress(asyncio.CancelledError):
                            await task


@asynccontextmanager
async def reloading(
    edge: Edge,
    *,
    on_reload: OnReload | None = None,
    counter_for: CounterFor = TokenCounter,
    interval_s: float | None = WATCH_INTERVAL_S,
) -> AsyncIterator[Reloader]:
    """A `Reloader` for `edge`, watching and handling SIGHUP for as long as it is open.

    Store `reloader.live` in the app state; exchanges read `live.current`.
    """
    reloader = Reloader(Live(edge), on_reload=on_reload, counter_for=counter_for)
    async with reloader.running(interval_s):
        yield reloader


def _keep_restart_only(running: Config, loaded: Config) -> Config:
    """`loaded`, except for the sections a running process cannot change (logged)."""
    kept = {
        f.name: getattr(running, f.name)
        for f in dataclasses.fields(Config)
        if f.name not in RELOADABLE and getattr(running, f.name) != getattr(loaded, f.name)
    }
    for name in kept:
        log.warning(
            "config reload: `%s` changed in %s but needs a restart; ignored", name, loaded.source
        )
    return dataclasses.replace(loaded, **kept) if kept else loaded


def _add_sighup(handler: Callable[[], None]) -> signal.Signals | None:
    """Handle SIGHUP on the running loop; None where signals cannot be (threads, Windows)."""
    hup: signal.Signals | None = getattr(signal, "SIGHUP", None)
    if hup is None or threading.current_thread() is not threading.main_thread():
        return None
    try:
        asyncio.get_running_loop().add_signal_handler(hup, handler)
    except (NotImplementedError, RuntimeError, ValueError):
        return None
    return hup


def serve_workers(config: uvicorn.Config, sock: socket.socket | None = None) -> None:
    """Run `config.workers` worker processes as `uvicorn.run` does, except that SIGHUP makes
    every worker reload its config in place (validated, swapped, counted, caches kept)
    instead of uvicorn's default of replacing the workers, and that a worker failing to
    start makes the parent exit 3, not 0."""
    # Imported here: only the parent process supervises (and this also loads watchfiles).
    from uvicorn.config import STARTUP_FAILURE
    from uvicorn.supervisors import Multiprocess

    class Supervisor(Multiprocess):
        def handle_hup(self) -> None:
            forward_sighup(self.processes)

    supervisor = Supervisor(config, sockets=[sock or config.bind_socket()])
    supervisor.run()
    # uvicorn stops every worker once one failed to start, then returns as after a clean
    # stop: exit with the failure, as one worker does.
    if any(process.exitcode == STARTUP_FAILURE for process in supervisor.processes):
        raise SystemExit(STARTUP_FAILURE)


def forward_sighup(processes: Sequence[Process]) -> int:
    """Send SIGHUP to every worker that is serving; returns how many got it."""
    sent = 0
    for process in processes:
        # A worker still starting has no handler yet (SIGHUP would kill it), and reads the
        # files as they are now anyway.
        if process.pid is not None and process.is_ready(timeout=1):
            os.kill(process.pid, signal.SIGHUP)
            sent += 1
    log.info("SIGHUP: asked %d of %d workers to reload their config", sent, len(processes))
    return sent
