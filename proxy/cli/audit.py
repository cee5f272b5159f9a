"""`curator audit list | show | diff | export | import | migrate | serve`: read the audit log.

Each subcommand reads the store named by `--path` (a SQLite file, a JSONL file, or a
postgresql:// URL), or else by the `audit:` section of `--config` (default ./config.yaml,
if present; only that section is read, so a config holding just the DSN will do), or else
./curator-audit.db. The reader is chosen by `--sink`, the config's `audit.sink`, the URL's
scheme or the file's suffix (`readers.registry`), never by the file's content.
`add_subparsers` hooks them into the `curator` CLI; every handler takes the parsed
arguments and returns an exit status.
"""

from __future__ import annotations

import argparse
import functools
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import orjson

from policies.errors import ConfigError
from policies.yamlsrc import parse_file
from proxy.cli import audit_bundle, audit_serve
from proxy.cli.audit_bundle import Refused
from proxy.cli.audit_render import render_diff, render_record, render_table
from proxy.config.audit import AuditConfig, masked_location, parse_audit
from proxy.observability.audit.bundle.format import BundleError
from proxy.observability.audit.readers.base import Store
from proxy.observability.audit.readers.query import record_conversation
from proxy.observability.audit.readers.registry import READERS, open_reader, reader_for
from proxy.observability.audit.sinks.base import StoreUnavailable
from proxy.observability.audit.sinks.migrations import SchemaTooNew
from proxy.observability.audit.sinks.registry import SINKS

DEFAULT_CONFIG = "config.yaml"


@dataclass(frozen=True, slots=True)
class Target:
    """The store a command reads: where, which sink wrote it (None: infer), its options."""

    location: str
    sink: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


class UsageError(Exception):
    """A problem with the command line or the store it names; printed without a traceback."""


def add_subparsers(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `audit` and its subcommands to the `curator` CLI's subparsers."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", help="config file whose audit: section names the store")
    common.add_argument(
        "--path",
        "--db",
        dest="path",
        help="audit store: a .db or .jsonl file, or a postgresql:// URL; overrides --config",
    )
    common.add_argument(
        "--sink", choices=sorted(READERS), help="which store --path is (default: by its name)"
    )
    audit = subparsers.add_parser("audit", help="read the audit log")
    commands = audit.add_subparsers(dest="audit_command", metavar="COMMAND", required=True)
    lister = commands.add_parser("list", parents=[common], help="newest records first")
    lister.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    lister.add_argument("--route", help="only this route's records")
    lister.add_argument(
        "--conversation", help="only this conversation's records, oldest first (its turns)"
    )
    lister.add_argument("--json", action="store_true", help="one JSON object per line")
    lister.set_defaults(func=run_list)
    show = commands.add_parser("show", parents=[common], help="one record in full")
    show.add_argument("id", help="a request id (x-curator-request-id), or a unique prefix")
    show.add_argument("--json", action="store_true", help="the record as JSON")
    show.set_defaults(func=run_show)
    diff = commands.add_parser("diff", parents=[common], help="what curation removed, and who")
    diff.add_argument("id", help="a request id (x-curator-request-id), or a unique prefix")
    diff.set_defaults(func=run_diff)
    export, load = audit_bundle.add_parsers(commands, common)
    export.set_defaults(func=run_export)
    load.set_defaults(func=run_import)
    migrate = commands.add_parser(
        "migrate", parents=[common], help="bring the store's schema up to date (also done at start)"
    )
    migrate.set_defaults(func=run_migrate)
    audit_serve.add_parser(commands, common).set_defaults(func=run_serve)


Handler = Callable[[argparse.Namespace], int]


def handled_as(command: str) -> Callable[[Handler], Handler]:
    """Report store and usage problems as one line (`curator COMMAND: ...`) and exit
    status 1, not a traceback."""

    def wrap(run: Handler) -> Handler:
        @functools.wraps(run)
        def handler(args: argparse.Namespace) -> int:
            try:
                return run(args)
            except (UsageError, LookupError, FileNotFoundError, Refused, BundleError) as exc:
                return _fail(str(exc), command)
            except (sqlite3.DatabaseError, StoreUnavailable, SchemaTooNew) as exc:
                return _fail(f"cannot read the audit store: {exc}", command)
            except Exception as exc:
                if type(exc).__module__.startswith("psycopg"):  # the optional driver's errors
                    where = masked_location(str(exc))
                    return _fail(f"cannot read the audit store: {where}", command)
                raise

        return handler

    return wrap


handled = handled_as("audit")


@handled
def run_list(args: argparse.Namespace) -> int:
    if args.limit < 1:
        return _fail("--limit must be at least 1")
    with open_store(args) as store:
        if args.conversation is None:
            rows = store.summaries(limit=args.limit, route=args.route)
        else:
            rows = conversation_turns(store, args.conversation, args.route)[-args.limit :]
    if args.json:
        for row in rows:
            _print(orjson.dumps(row).decode())
    else:
        _print(render_table(rows) if rows else "no audit records")
    return 0


def conversation_of(record: dict[str, Any]) -> str:
    """The record's `conversation` field, else (older records) the key the viewer derives."""
    key = record.get("conversation")
    return key if isinstance(key, str) and key else record_conversation(record)


def conversation_turns(store: Store, key: str, route: str | None) -> list[dict[str, Any]]:
    """A conversation's chat records as list rows (without messages), oldest first."""
    rows = []
    for record in store.between(0.0):
        if not conversation_of(record).startswith(key) or (route and record.get("route") != route):
            continue
        original = record.pop("original", None) or []
        curated = record.pop("curated", None) or original
        rows.append({**record, "messages": len(original), "curated_messages": len(curated)})
    # A JSONL file is in write order, which batches from several workers may interleave.
    return sorted(rows, key=lambda row: str(row.get("time")))


@handled
def run_show(args: argparse.Namespace) -> int:
    record = _record(args)
    text = orjson.dumps(record, option=orjson.OPT_INDENT_2).decode()
    _print(text if args.json else render_record(record))
    return 0


@handled
def run_diff(args: argparse.Namespace) -> int:
    _print(render_diff(_record(args)))
    return 0


@handled
def run_export(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        done = audit_bundle.export(args, store)
    if done:
        sys.stderr.write(f"curator audit export: {done}\n")
    return 0


@handled
def run_import(args: argparse.Namespace) -> int:
    target = audit_target(args.config, args.path, args.sink)
    done = audit_bundle.load(args, target.location, target.sink, target.options)
    sys.stderr.write(f"curator audit import: {done}\n")
    return 0


@handled
def run_migrate(args: argparse.Namespace) -> int:
    target = audit_target(args.config, args.path, args.sink)
    sink = SINKS.get(target.sink or _inferred(target.location))
    if sink is None or sink.migrate is None:
        return _fail(f"{target.sink or 'this'} store has no schema to migrate")
    applied = sink.migrate(target.location, target.options)
    where = masked_location(target.location)
    if applied:
        _print(f"{where}: applied schema versions {', '.join(map(str, applied))}")
    else:
        _print(f"{where}: schema up to date")
    return 0


@handled
def run_serve(args: argparse.Namespace) -> int:
    target = audit_target(args.config, args.path, args.sink)
    config = args.config or (DEFAULT_CONFIG if os.path.exists(DEFAULT_CONFIG) else None)
    try:
        keys = audit_serve.admin_keys(config)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if not keys and not audit_serve.loopback(args.host):
        raise UsageError(
            f"--host {args.host} is not loopback: set auth.admin_keys in the config first"
        )
    store = (target.location, target.sink, target.options)
    return audit_serve.serve(store, args.host, args.port, keys)


def _inferred(location: str) -> str:
    return reader_for(location).name


def _record(args: argparse.Namespace) -> dict[str, Any]:
    with open_store(args) as store:
        record = store.get(args.id)
    if record is None:
        raise UsageError(f"no audit record with id {args.id!r}")
    return record


def audit_target(config: str | None, override: str | None, sink: str | None = None) -> Target:
    """The store to read: `--path`, else the config's audit section, else the default."""
    if override:
        return Target(override, sink)
    if config is None and not os.path.exists(DEFAULT_CONFIG):
        return Target(os.path.abspath(AuditConfig().path), sink)
    audit = _audit_section(config or DEFAULT_CONFIG)
    if not audit.enabled:
        raise UsageError("the config has `audit: {sink: none}`; pass --path to read a store")
    if audit.path == "-":
        raise UsageError("the config writes the audit log to stdout; pass --path to read a copy")
    return Target(audit.path, sink or audit.sink, audit.options)


def _audit_section(config: str) -> AuditConfig:
    """Only the `audit:` section: a problem elsewhere in the config must not hide the log."""
    try:
        located = parse_file(config, env=os.environ)
        own = [p for p in located.problems if p.path == "audit" or p.path.startswith("audit.")]
        if own:
            raise ConfigError(own)
        data = located.data.get("audit") if isinstance(located.data, dict) else None
        return parse_audit(data, file=config, lines=located.lines)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot read config {config}: {exc.strerror or exc}") from None


@contextmanager
def open_store(args: argparse.Namespace) -> Iterator[Store]:
    target = audit_target(args.config, args.path, args.sink)
    try:
        store = open_reader(target.location, target.sink, target.options)
    except OSError as exc:
        where = masked_location(target.location)
        raise UsageError(f"cannot read audit store {where}: {exc.strerror or exc}") from None
    try:
        yield store
    finally:
        store.close()


def _print(text: str) -> None:
    sys.stdout.write(text + "\n")


def _fail(message: str, command: str = "audit") -> int:
    sys.stderr.write(f"curator {command}: {message}\n")
    return 1
