"""`curator audit list | show | diff | export | serve`: read the audit log.

Each subcommand reads the store named by `--path` (a SQLite store or a JSONL file, told
apart by their first bytes), or else by the `audit:` section of `--config` (default
./config.yaml, if present), or else ./curator-audit.db. `add_subparsers` hooks them into
the `curator` CLI; every handler takes the parsed arguments and returns an exit status.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import orjson

from policies.errors import ConfigError
from policies.yamlsrc import parse_file
from proxy.cli import audit_serve
from proxy.cli.audit_render import render_diff, render_record, render_table
from proxy.cli.pipes import run_to_stdout
from proxy.config import loader as proxy_config
from proxy.config.audit import AuditConfig, parse_audit
from proxy.observability.audit.readers.query import parse_time, record_conversation
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.observability.audit.sinks.jsonl import JsonlReader

DEFAULT_CONFIG = "config.yaml"


class Store(Protocol):
    """What the subcommands need from a store; SQLite and JSONL readers both provide it."""

    def summaries(self, *, limit: int, route: str | None = None) -> list[dict[str, Any]]: ...

    def get(self, record_id: str) -> dict[str, Any] | None: ...

    def between(self, since: float, until: float | None = None) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...


class UsageError(Exception):
    """A problem with the command line or the store it names; printed without a traceback."""


def add_subparsers(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `audit` and its subcommands to the `curator` CLI's subparsers."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", help="config file whose audit: section names the store")
    common.add_argument(
        "--path", "--db", dest="path", help="audit store (.db) or JSONL file; overrides --config"
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
    export = commands.add_parser("export", parents=[common], help="records as JSONL on stdout")
    export.add_argument("--since", required=True, help="ISO time, or a duration ago: 1h, 2d")
    export.add_argument("--until", help="ISO time, or a duration ago (default: now)")
    export.set_defaults(func=run_export)
    audit_serve.add_parser(commands, common).set_defaults(func=run_serve)


def _handled(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Report store and usage problems as one line and exit status 1, not a traceback."""

    @functools.wraps(run)
    def handler(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except (UsageError, LookupError, FileNotFoundError) as exc:
            return _fail(str(exc))
        except sqlite3.DatabaseError as exc:
            return _fail(f"cannot read the audit store: {exc}")

    return handler


@_handled
def run_list(args: argparse.Namespace) -> int:
    if args.limit < 1:
        return _fail("--limit must be at least 1")
    with _store(args) as store:
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


@_handled
def run_show(args: argparse.Namespace) -> int:
    record = _record(args)
    text = orjson.dumps(record, option=orjson.OPT_INDENT_2).decode()
    _print(text if args.json else render_record(record))
    return 0


@_handled
def run_diff(args: argparse.Namespace) -> int:
    _print(render_diff(_record(args)))
    return 0


@_handled
def run_export(args: argparse.Namespace) -> int:
    now = time.time()
    try:
        since = parse_time(args.since, now=now)
        until = parse_time(args.until, now=now) if args.until else None
    except ValueError as exc:
        return _fail(str(exc))
    with _store(args) as store:
        for record in store.between(since, until):
            _print(orjson.dumps(record).decode())
    return 0


@_handled
def run_serve(args: argparse.Namespace) -> int:
    path = audit_location(args.config, args.path)
    config = args.config or (DEFAULT_CONFIG if os.path.exists(DEFAULT_CONFIG) else None)
    try:
        keys = audit_serve.admin_keys(config)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if not keys and not audit_serve.loopback(args.host):
        raise UsageError(
            f"--host {args.host} is not loopback: set auth.admin_keys in the config first"
        )
    return audit_serve.serve(path, args.host, args.port, keys)


def _record(args: argparse.Namespace) -> dict[str, Any]:
    with _store(args) as store:
        record = store.get(args.id)
    if record is None:
        raise UsageError(f"no audit record with id {args.id!r}")
    return record


def audit_location(config: str | None, override: str | None) -> str:
    """The store to read: `--path`, else the config's audit path, else the default."""
    if override:
        return override
    if config is None and not os.path.exists(DEFAULT_CONFIG):
        return os.path.abspath(AuditConfig().path)
    audit = _audit_section(config or DEFAULT_CONFIG)
    if not audit.enabled:
        raise UsageError("the config has `audit: {sink: none}`; pass --path to read a store")
    if audit.path == "-":
        raise UsageError("the config writes the audit log to stdout; pass --path to read a copy")
    return audit.path


def _audit_section(config: str) -> AuditConfig:
    try:
        # Prefer the full loader once its Config carries the audit section.
        if "audit" in {f.name for f in dataclasses.fields(proxy_config.Config)}:
            with contextlib.suppress(ConfigError):  # then read only the section, below
                loaded = getattr(proxy_config.load_config(config), "audit", None)
                if isinstance(loaded, AuditConfig):
                    return loaded
        # Otherwise read only this section: a problem elsewhere must not hide the log.
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


def open_store(path: str) -> Store:
    """A reader for the store at `path`, SQLite or JSONL by its first bytes."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(16)
    except OSError as exc:
        raise UsageError(f"cannot read audit store {path}: {exc.strerror or exc}") from None
    if head.startswith(b"SQLite format 3"):
        return SqliteReader(path)
    return JsonlReader(path)


@contextmanager
def _store(args: argparse.Namespace) -> Iterator[Store]:
    store = open_store(audit_location(args.config, args.path))
    try:
        yield store
    finally:
        store.close()


def main(argv: list[str] | None = None) -> int:
    """`python -m proxy.cli.audit ...`, until `curator audit` is wired in."""
    parser = argparse.ArgumentParser(prog="curator")
    add_subparsers(parser.add_subparsers(dest="command", required=True))
    return run_to_stdout(lambda: _run(parser, argv))


def _run(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    args = parser.parse_args(argv)
    status: int = args.func(args)
    return status


def _print(text: str) -> None:
    sys.stdout.write(text + "\n")


def _fail(message: str) -> int:
    sys.stderr.write(f"curator audit: {message}\n")
    return 1


if __name__ == "__main__":
    sys.exit(main())
