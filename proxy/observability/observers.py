"""The audit log and the metrics, wired to the app: opened per worker, fed by exchange records.

`open_observability` runs in the app's lifespan, so every worker process gets its own audit
writer thread (threads do not survive the fork/spawn that starts `--workers`) and its own
metric families. On shutdown the writer gets `AUDIT_CLOSE_TIMEOUT_S` to write what is
queued, and a multiprocess worker drops its live gauges.

The audit reads each finished exchange through `proxy.observability.audit.observer`;
paths no protocol curates and `mode: off` routes get no audit record; metrics count them
all.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from proxy.config.loader import Config
from proxy.config.viewer import PUBLIC_PREFIX
from proxy.observability.audit.configured import open_audit
from proxy.observability.audit.observer import AuditObserver
from proxy.observability.audit.sinks.base import STDOUT
from proxy.observability.audit.writer import AuditWriter, WriteOutcome
from proxy.observability.exchange import Observer, Tracer
from proxy.observability.metrics.families import Metrics
from proxy.observability.metrics.labels import labels_for
from proxy.observability.metrics.multiproc import mark_worker_dead
from proxy.priority import Turns
from proxy.serving.admin import admin_listener
from proxy.viewer.app import Viewer
from proxy.viewer.asgi import ViewerApp
from proxy.viewer.auth import AdminKeys
from proxy.viewer.store import opener

log = logging.getLogger("curator.observers")

AUDIT_CLOSE_TIMEOUT_S = 5.0
"""How long shutdown waits for queued audit records to be written."""
PUBLISH_INTERVAL_S = 0.5
"""Multiprocess mode: how often a worker's counts reach the shared metric files."""


@dataclass(frozen=True, slots=True)
class Observability:
    """What the lifespan opened: the metrics and audit writer (None when off), the
    observers every exchange is handed to, and the turns the worker's background threads
    take (the audit writer's, and the curation thread `open_edge` starts)."""

    metrics: Metrics | None
    audit: AuditWriter | None
    observers: tuple[Observer, ...]
    turns: Turns = field(default_factory=Turns)
    tracing: Tracer | None = None
    """Starts each request's span when OpenTelemetry traces are on (`otel:`)."""

    def config_reloaded(self, result: str, config: Config | None) -> None:
        """`reloading(on_reload=...)`: count the reload; a good one brings new label values."""
        if self.metrics is not None:
            labels = labels_for(config) if config is not None else None
            self.metrics.config_reloaded(result == "ok", labels)

    def tokenizer_fallback(self, _encoding: str) -> None:
        """`TokenCounter(on_fallback=...)`: an encoding is estimated, not loaded."""
        if self.metrics is not None:
            self.metrics.tokenizer_fallback.inc()


@asynccontextmanager
async def open_observability(
    config: Config, extra: Sequence[Observer] = (), *, admin_socket: socket.socket | None = None
) -> AsyncIterator[Observability]:
    """Metrics, the audit writer and the admin listener (on `admin_socket` when given) for
    this process; closed on exit."""
    metrics = Metrics(labels_for(config)) if config.metrics.enabled else None
    turns = Turns()
    audit = _open_writer(config, metrics, turns)
    observers: list[Observer] = list(extra)
    if metrics is not None:
        observers.append(metrics.observe)
    if audit is not None:
        depth = metrics.audit_queue_depth.set if metrics is not None else None
        observers.append(AuditObserver(audit, depth))
        if metrics is not None:
            metrics.spend.thread.share(audit.run_soon)
    async with AsyncExitStack() as stack:
        if audit is not None:
            stack.push_async_callback(_close_writer, audit)
        tracing = await _open_otel(stack, config, metrics, observers)
        if metrics is not None:
            stack.callback(metrics.spend.thread.close)
            lag = metrics.loop_lag.monitor()
            lag.start()
            stack.callback(lag.stop)
        if metrics is not None and metrics.multiprocess_dir:
            # Only this worker's live gauges (in-flight, queue depth) go; counters stay.
            stack.callback(mark_worker_dead, os.getpid())
            stack.callback(metrics.publish)  # runs first: the last counts reach the files
            publisher = asyncio.get_running_loop().create_task(_publishing(metrics))
            stack.callback(publisher.cancel)
        if metrics is not None and config.metrics.port is not None:
            await stack.enter_async_context(
                admin_listener(
                    config.metrics.host or config.server.host,
                    config.metrics.port,
                    config.metrics.path,
                    metrics.render,
                    reuse_port=bool(metrics.multiprocess_dir),
                    viewer=admin_viewer(config),
                    sock=admin_socket,
                )
            )
        yield Observability(metrics, audit, tuple(observers), turns, tracing)


async def _open_otel(
    stack: AsyncExitStack, config: Config, metrics: Metrics | None, observers: list[Observer]
) -> Tracer | None:
    """OpenTelemetry, when `otel.enabled`: its observer joins `observers` (imported only
    then: the SDK is an optional extra)."""
    if not config.otel.enabled:
        return None
    from proxy.observability.otel import open_otel

    dropped = metrics.otel.dropped if metrics is not None else _uncounted
    otel = await stack.enter_async_context(open_otel(config, dropped))
    if otel is None:  # OTEL_SDK_DISABLED, or both signals' exporters set to none
        return None
    observers.append(otel.observer)
    return otel.tracing


def _uncounted(_signal: str, _reason: str, _count: int) -> None:
    """Drops go uncounted without the metrics (`metrics.enabled: false`)."""


def viewer_on(config: Config) -> bool:
    """Whether there is a viewer to serve: `viewer.enabled`, and the audit log goes to a
    store it can read back."""
    audit = config.audit
    return config.viewer.enabled and audit.enabled and audit.path != STDOUT


def admin_viewer(config: Config, *, prefix: str = "") -> Viewer | None:
    """The audit viewer over this config's audit store, when `viewer_on`."""
    if not viewer_on(config):
        return None
    audit = config.audit
    return Viewer(
        opener(audit.path, audit.sink, audit.options),
        AdminKeys(config.auth.admin_keys),
        prefix=prefix,
    )


def viewer_notice(config: Config, host: str, port: int) -> str | None:
    """What the startup log says of the viewer on the client port, or that it is served
    nowhere; None when it is off, or when the admin listener (`metrics.port`) serves it,
    which logs its own URL once it is bound."""
    if not viewer_on(config):
        return None
    if config.viewer.public:
        shown = f"[{host}]" if ":" in host else host
        return f"audit viewer on http://{shown}:{port}{PUBLIC_PREFIX}/requests"
    if config.metrics.enabled and config.metrics.port is not None:
        return None
    return (
        "audit viewer not served: it is on the admin listener, which needs metrics.port "
        "(or viewer.public: true); `curator audit serve` serves it without a proxy"
    )


def viewer_routes(config: Config) -> list[Route]:
    """The viewer on the client port under `/curator/`, only with `viewer.public: true`
    (which the config refuses without `auth.admin_keys`)."""
    viewer = admin_viewer(config, prefix=PUBLIC_PREFIX) if config.viewer.public else None
    if viewer is None:
        return []
    app = ViewerApp(viewer, PUBLIC_PREFIX)
    return [Route(PUBLIC_PREFIX + "/{rest:path}", app, methods=["GET", "HEAD", "POST"])]


async def _publishing(metrics: Metrics) -> None:
    """Multiprocess mode: this worker's counts reach the shared files twice a second (see
    `proxy.observability.metrics.loop`), so any worker's scrape sees them."""
    while True:
        await asyncio.sleep(PUBLISH_INTERVAL_S)
        metrics.publish()


def _open_writer(config: Config, metrics: Metrics | None, turns: Turns) -> AuditWriter | None:
    if not config.audit.enabled:
        return None
    holder: list[AuditWriter] = []

    def on_outcome(outcome: WriteOutcome) -> None:
        if metrics is not None:
            depth = holder[0].queue_depth() if holder else 0
            metrics.audit_outcome(outcome, depth)

    spool = metrics.spool if metrics is not None else None
    writer = open_audit(
        config.audit,
        on_outcome=on_outcome,
        turns=turns,
        on_spool=spool.state if spool is not None else None,
        on_spool_dropped=spool.drop if spool is not None else None,
    )
    if writer is not None:
        holder.append(writer)
        log.info("audit log: %s %s", config.audit.sink, config.audit.where)
    return writer


async def _close_writer(writer: AuditWriter) -> None:
    # Joining the writer thread blocks; other lifespans and connections keep the loop.
    await asyncio.to_thread(writer.close, AUDIT_CLOSE_TIMEOUT_S)


def metrics_routes(config: Config) -> list[Route]:
    """`GET <metrics.path>` on the main listener, when enabled there (no admin port)."""
    if not config.metrics.enabled or config.metrics.port is not None:
        return []
    return [Route(config.metrics.path, _scrape, methods=["GET"])]


async def _scrape(request: Request) -> Response:
    metrics: Metrics | None = request.state.edge.current.metrics
    if metrics is None:
        return Response(status_code=404)
    # Multiprocess mode reads every worker's files: off the event loop.
    body, content_type = await asyncio.to_thread(metrics.render)
    return Response(body, headers={"content-type": content_type})
