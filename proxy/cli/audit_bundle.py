"""`curator audit export` and `curator audit import`: records out of a store and back in.

`export --format jsonl` (the default) writes each record whole, one JSON object a line:
what `curator simulate` reads, and what a log pipeline wants; an agent's resent history
is written again on every line. `export --format bundle` writes a gzip'd bundle that keeps
the store's content addressing, each message once (`observability.audit.bundle`), and
`import` loads one into a SQLite or PostgreSQL store: the same records, byte for byte.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator, Mapping
from typing import IO, Any

import orjson

from proxy.config.audit import masked_location
from proxy.observability.audit.bundle.export import write_bundle
from proxy.observability.audit.bundle.load import import_bundle
from proxy.observability.audit.readers.base import ContentStore, Store
from proxy.observability.audit.readers.query import time_window
from proxy.observability.audit.readers.registry import open_reader, reader_for
from proxy.observability.audit.sinks.base import Retention
from proxy.observability.audit.sinks.registry import SINKS

FORMATS = ("jsonl", "bundle")


class Refused(Exception):
    """A problem with the command line or the store it names: one line, exit status 1."""


def add_parsers(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """`export` and `import`; the caller sets their handlers."""
    export = commands.add_parser(
        "export", parents=[common], help="records as JSONL, or a content-addressed bundle"
    )
    export.add_argument("--since", required=True, help="ISO time, or a duration ago: 1h, 2d")
    export.add_argument("--until", help="ISO time, or a duration ago (default: now)")
    export.add_argument(
        "--format",
        choices=FORMATS,
        default="jsonl",
        help="jsonl: a whole record a line (default); bundle: gzip'd, each message once",
    )
    export.add_argument("-o", "--output", help="write to this file (default: stdout)")
    load = commands.add_parser(
        "import", parents=[common], help="load a bundle into a SQLite or PostgreSQL store"
    )
    load.add_argument("bundle", metavar="BUNDLE", help="from export --format bundle; - reads stdin")
    load.add_argument(
        "--append",
        action="store_true",
        help="into a store that already holds records (SQLite would hold a record twice)",
    )
    return export, load


def export(args: argparse.Namespace, store: Store) -> str | None:
    """Write the records; a summary line for stderr (bundle), or None."""
    try:
        since, until = time_window(args.since, args.until)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    with _output(args.output, binary=args.format == "bundle") as out:
        if args.format == "jsonl":
            for record in store.between(since, until):
                out.write(orjson.dumps(record) + b"\n")
            return None
        started = time.monotonic()
        written = write_bundle(store, out, since, until)
    seconds = time.monotonic() - started
    return f"{written.records} records, {written.messages} messages in {seconds:.1f} s"


def load(
    args: argparse.Namespace, location: str, sink_name: str | None, options: Mapping[str, Any]
) -> str:
    """Import the bundle into the store at `location`; a summary line for stderr."""
    name = sink_name or reader_for(location).name
    sink_type = SINKS.get(name)
    if sink_type is None or not sink_type.by_reference:
        raise Refused(f"import needs a SQLite or PostgreSQL store, not {name}")
    where = masked_location(location)
    if not args.append and _holds_records(location, name, options):
        raise Refused(f"{where} already holds records: import into a new store, or --append")
    reader: list[Store] = []

    def fetch(digest: bytes) -> bytes:
        # Opened on first use, once the sink has created the store.
        if not reader:
            reader.append(open_reader(location, name, options))
        if not isinstance(reader[0], ContentStore):
            raise Refused(f"{where}: cannot read message bodies back")
        return reader[0].bodies([digest])[digest]

    started = time.monotonic()
    sink = sink_type.open(location, options, Retention())
    try:
        with _input(args.bundle) as source:
            loaded = import_bundle(source, sink, fetch)
    finally:
        sink.close()
        for opened in reader:
            opened.close()
    seconds = time.monotonic() - started
    return f"{where}: {loaded.records} records, {loaded.messages} messages in {seconds:.1f} s"


def _holds_records(location: str, name: str, options: Mapping[str, Any]) -> bool:
    try:
        store = open_reader(location, name, options)
    except FileNotFoundError:
        return False
    try:
        return bool(store.summaries(limit=1))
    finally:
        store.close()


@contextlib.contextmanager
def _output(path: str | None, *, binary: bool) -> Iterator[IO[bytes]]:
    if path is not None and path != "-":
        with open(path, "wb") as handle:
            yield handle
        return
    if binary and sys.stdout.isatty():
        raise Refused("a bundle is binary (gzip): pass --output FILE, or redirect stdout")
    sys.stdout.flush()
    yield sys.stdout.buffer
    sys.stdout.buffer.flush()


@contextlib.contextmanager
def _input(path: str) -> Iterator[IO[bytes]]:
    if path == "-":
        yield sys.stdin.buffer
        return
    with open(path, "rb") as handle:
        yield handle
