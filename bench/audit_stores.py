"""Audit stores side by side: what writing records costs the proxy's process, per store.

    python -m bench.audit_stores [--dsn postgresql://...] [--records N]

Without `--dsn` a throwaway PostgreSQL cluster is started on loopback (tests/postgres.py;
needs Debian's `postgresql`). Two workloads, as the proxy's writer thread sees them:
- passthrough: small one-message records, in batches of 50 (the writer's batching under
  load);
- large warm: an agent conversation resent every turn (60 messages, one new), one record a
  batch, so all but one message are already stored.

For each store: the proxy process's CPU per record (what competes with serving; a
database's own CPU runs elsewhere) and the wall time per record (how long the writer thread
is busy). `postgres (asyncpg)` runs the same SQL through asyncpg on an event loop in the
thread, for the driver choice (only when asyncpg is importable; it is not a dependency),
sending every message as the psycopg sink did before it remembered what it stored.

The driver choice, measured here (2 shared cores, 3,000 records, both drivers sending every
message, us per record, proxy CPU / writer wall):

| workload | sqlite | psycopg 3, text params | psycopg 3, binary params | asyncpg |
|---|---|---|---|---|
| passthrough | 31 / 84 | 69 / 315 | 35 / 164 | 32 / 169 |
| large warm | 904 / 3161 | 5719 / 20526 | 965 / 3902 | 793 / 3471 |

With binary parameters (`%b`) psycopg is within noise of asyncpg, and its blocking API runs
in the existing writer thread as is (asyncpg would need an event loop of its own there), so
the sink uses psycopg. Remembering the digests it stored (`KNOWN_MAX`) then took large warm
to 493 / 2750 with psycopg, below SQLite's 806 / 3344 (whose reference counts then
rewrote every message's row each time). Since SQLite's counts have a table of their own
(schema 3), the two are within noise: large warm 334-396 / 425-522 on SQLite, 358-414 /
525-668 on PostgreSQL (3 runs).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from proxy.observability.audit.entry import AuditRecord, RecordBuilder
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks import postgres_schema as schema
from proxy.observability.audit.sinks import postgres_writer as pgw
from proxy.observability.audit.sinks.postgres_writer import PostgresSink
from proxy.observability.audit.sinks.report_columns import REPORT_COLUMNS, report_values
from proxy.observability.audit.sinks.sqlite import SqliteSink
from proxy.observability.exchange import ExchangeRecord
from proxy.protocols.chat import CHAT

Write = Callable[[Sequence[AuditRecord]], None]


def passthrough(builder: RecordBuilder, count: int) -> list[list[AuditRecord]]:
    records = [
        builder.build(
            ExchangeRecord(
                f"p{i}",
                1e9 + i,
                "POST",
                CHAT.path,
                protocol=CHAT,
                route="default",
                model="gpt-4o",
                status=200,
                original=[{"role": "user", "content": f"request {i}: say hello"}],
                response=b'{"choices":[{"message":{"role":"assistant","content":"hello"}}]}',
            )
        )
        for i in range(count)
    ]
    return [records[i : i + 50] for i in range(0, count, 50)]


def large_warm(builder: RecordBuilder, count: int) -> list[list[AuditRecord]]:
    system = {"role": "system", "content": "You are a coding agent. " * 200}
    history: list[dict[str, Any]] = [system]
    history += [{"role": "user", "content": f"step {i} " + "context " * 300} for i in range(59)]
    batches = []
    for i in range(count):
        history = [*history[:1], *history[2:], {"role": "user", "content": f"turn {i} " * 300}]
        entry = ExchangeRecord(
            f"w{i}",
            1e9 + i,
            "POST",
            CHAT.path,
            protocol=CHAT,
            route="agents",
            original=list(history),
        )
        batches.append([builder.build(entry)])
    return batches


def measure(write: Write, batches: list[list[AuditRecord]]) -> tuple[float, float]:
    """(CPU us per record in this process, wall us per record)."""
    records = sum(len(b) for b in batches)
    cpu, wall = time.process_time(), time.perf_counter()
    for batch in batches:
        write(batch)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return cpu / records * 1e6, wall / records * 1e6


class AsyncpgWriter:
    """The PostgreSQL sink's two statements through asyncpg, on a loop owned by the caller."""

    def __init__(self, dsn: str) -> None:
        import asyncpg

        self._loop = asyncio.new_event_loop()
        self._conn = self._loop.run_until_complete(asyncpg.connect(dsn))
        self._messages = _numbered(pgw._UPSERT_MESSAGES)
        self._records = _numbered(pgw._INSERT_RECORDS)

    def write(self, records: Sequence[AuditRecord]) -> None:
        self._loop.run_until_complete(self._write(records))

    async def _write(self, records: Sequence[AuditRecord]) -> None:
        bodies: dict[bytes, bytes] = {}
        used: dict[bytes, float] = {}
        columns: list[list[Any]] = [[] for _ in range(12 + len(REPORT_COLUMNS))]
        for record in records:
            for m in record.original + (record.curated or ()):
                bodies[m.digest], used[m.digest] = m.data, record.time
            original = b"".join(m.digest for m in record.original)
            row = (pgw.record_uid(record, original, None), record.time)
            row += tuple(record.fields.get(c) for c in pgw._COLUMNS)
            row += (original, None, pgw.orjson.dumps(record.fields))
            row += report_values(record.time, record.fields)
            for column, value in zip(columns, row, strict=True):
                column.append(value)
        digests = sorted(bodies)
        async with self._conn.transaction():
            await self._conn.execute(
                self._messages, digests, [used[d] for d in digests], [bodies[d] for d in digests]
            )
            await self._conn.execute(self._records, *columns)

    def close(self) -> None:
        self._loop.run_until_complete(self._conn.close())
        self._loop.close()


def _numbered(statement: str) -> str:
    parts = statement.replace("%b", "%s").split("%s")
    numbered = [f"{part}${n}" for n, part in enumerate(parts[:-1], start=1)]
    return "".join(numbered) + parts[-1]


def fresh_database(base: str, name: str) -> str:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}".encode())
        conn.execute(f"CREATE DATABASE {name}".encode())
    return base.rsplit("/", 1)[0] + "/" + name


def run(base_dsn: str, records: int, workdir: Path) -> list[tuple[str, str, float, float]]:
    builder = RecordBuilder(Redactor.build())
    workloads = {"passthrough": passthrough, "large warm": large_warm}
    rows = []
    for workload, make in workloads.items():
        n = records if workload == "passthrough" else records // 10
        for store in ("sqlite", "postgres (psycopg)", "postgres (asyncpg)"):
            batches = make(builder, n)
            tag = f"{workload.replace(' ', '_')}_{store.split()[0]}"
            if store == "sqlite":
                sink: Any = SqliteSink(str(workdir / f"{tag}.db"))
                write: Write = sink.write_many
            elif "psycopg" in store:
                sink = PostgresSink(fresh_database(base_dsn, f"bench_{tag}_psycopg"))
                write = sink.write_many
            else:
                dsn = fresh_database(base_dsn, f"bench_{tag}_asyncpg")
                with schema.connect(dsn) as conn:
                    schema.migrate(conn, where="bench")
                try:
                    sink = AsyncpgWriter(dsn)
                except ImportError:
                    continue
                write = sink.write
            write(batches[0])  # connect, migrate, warm caches
            cpu, wall = measure(write, batches[1:])
            sink.close()
            rows.append((workload, store, cpu, wall))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dsn", help="a database to create the bench databases from")
    parser.add_argument("--records", type=int, default=5000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = None
        base = args.dsn
        if base is None:
            from tests.postgres import PgServer, binaries

            found = binaries()
            if found is None:
                raise SystemExit("no PostgreSQL binaries: pass --dsn or apt-get install postgresql")
            server = PgServer(found, Path(tempfile.mkdtemp(prefix="bench-pg-")))
            server.start()
            base = server.dsn()
        try:
            rows = run(base, args.records, Path(tmp))
        finally:
            if server is not None:
                server.stop("immediate")
                shutil.rmtree(server.root, ignore_errors=True)
    print("| workload | store | proxy CPU us/record | writer wall us/record |")
    print("|---|---|---:|---:|")
    for workload, store, cpu, wall in rows:
        print(f"| {workload} | {store} | {cpu:.0f} | {wall:.0f} |")


if __name__ == "__main__":
    main()
