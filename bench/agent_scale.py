"""The audit tools at agent scale (issue R item 3): export, import, simulate and report over a
store of long agent conversations, each as its own process, its time and peak RSS measured.

    python -m bench.agent_scale [--agents 2 --turns 210 --tokens 1800000] [--before TREE]
                                [--dsn postgresql://...] [--million 1000000] [--out DIR]

`--before TREE` also runs each command from another source tree (e.g. `git archive main`
unpacked), the code paths of then, for the before/after rows. Without `--dsn` the
PostgreSQL rows are left out. The smoke test runs it small (`--agents 1 --turns 3`).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.agent_store import million, million_postgres, write_store

REPO = Path(__file__).resolve().parents[1]
SINCE = ("--since", "2025-12-31T00:00:00Z")


@dataclass(frozen=True, slots=True)
class Measured:
    """One command's run: wall seconds and the peak RSS of its process."""

    seconds: float
    rss_mb: float
    out_bytes: int


def measure(tree: Path, args: Sequence[str], out: Path | None = None) -> Measured:
    """`curator ARGS` run from the source tree `tree`, stdout to `out` (else discarded)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    command = [sys.executable, "-m", "proxy.cli", *args]
    started = time.monotonic()
    with open(out or os.devnull, "wb") as sink, tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, env=env, stdout=sink, stderr=errors, cwd=tree)
        # wait4 for the child's own peak RSS (getrusage would give the largest child's).
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - started
        errors.seek(0)
        err = errors.read().decode(errors="replace")
    if process.returncode != 0:
        raise RuntimeError(f"curator {' '.join(args)}: exit {process.returncode}: {err[-500:]}")
    size = out.stat().st_size if out is not None else 0
    return Measured(seconds, usage.ru_maxrss / 1024, size)


def rows(args: argparse.Namespace, work: Path) -> Iterator[tuple[str, str, str]]:
    """(what, code, figure) rows, each as soon as it is measured."""
    store = work / "agent.db"
    started = time.monotonic()
    count = write_store(str(store), args.agents, args.turns, args.tokens)
    yield ("store: records written", "-", f"{count} in {time.monotonic() - started:.0f} s")
    yield ("store: SQLite size", "-", _mb(store.stat().st_size))
    trees = [("after", REPO)] + ([("before", Path(args.before))] if args.before else [])
    db = ("--path", str(store))
    for label, tree in trees:
        jsonl = measure(tree, ["audit", "export", *SINCE, *db], work / f"{label}.jsonl")
        yield ("export JSONL", label, _figure(jsonl, size=True))
        (work / f"{label}.jsonl").unlink()
    bundle = work / "agent.bundle.gz"
    done = measure(REPO, ["audit", "export", *SINCE, *db, "--format", "bundle", "-o", str(bundle)])
    yield ("export bundle", "after", _figure(done) + f", {_mb(bundle.stat().st_size)}")
    copy = work / "copy.db"
    loaded = measure(REPO, ["audit", "import", str(bundle), "--path", str(copy)])
    yield ("import bundle, SQLite", "after", _figure(loaded))
    for label, tree in trees:
        summary = ["--summary"] if label == "after" else []
        sim = measure(tree, ["simulate", "--policy", "preset:default", *SINCE, *db, *summary])
        yield ("simulate (preset:default)", label, _figure(sim))
        yield ("report", label, _figure(measure(tree, ["report", *SINCE, *db])))
        one = ["report", *SINCE, *db, "--conversation", "agent-0"]
        yield ("report --conversation", label, _figure(measure(tree, one)))
    if args.dsn:
        pg = ("--path", args.dsn)
        loaded = measure(REPO, ["audit", "import", str(bundle), *pg])
        yield ("import bundle, PostgreSQL", "after", _figure(loaded))
        for label, tree in trees:
            yield ("report, PostgreSQL", label, _figure(measure(tree, ["report", *SINCE, *pg])))
            one = ["report", *SINCE, *pg, "--conversation", "agent-0"]
            yield ("report --conversation, PostgreSQL", label, _figure(measure(tree, one)))
    if args.million and args.million_dsn:
        started = time.monotonic()
        million_postgres(args.million_dsn, args.million)
        took = f"{time.monotonic() - started:.1f} s"
        yield (f"write and fill {args.million:,} records, PostgreSQL", "-", took)
        for label, tree in trees:
            run = measure(tree, ["report", *SINCE, "--path", args.million_dsn])
            yield (f"report, {args.million:,} records, PostgreSQL", label, _figure(run))
    if args.million:
        big = work / "million.db"
        started = time.monotonic()
        million(str(big), args.million)
        took = f"{time.monotonic() - started:.1f} s"
        yield (f"write and fill {args.million:,} records, SQLite", "-", took)
        for label, tree in trees:
            run = measure(tree, ["report", *SINCE, "--path", str(big)])
            yield (f"report, {args.million:,} records, SQLite", label, _figure(run))


def _figure(run: Measured, *, size: bool = False) -> str:
    text = f"{run.seconds:.1f} s, {run.rss_mb:,.0f} MB RSS"
    return text + (f", {_mb(run.out_bytes)}" if size else "")


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=2)
    parser.add_argument("--turns", type=int, default=210)
    parser.add_argument("--tokens", type=int, default=1_800_000, help="the last request's")
    parser.add_argument("--before", help="another source tree to run each command from")
    parser.add_argument("--dsn", help="a PostgreSQL database to import into and report from")
    parser.add_argument("--million", type=int, default=0, help="synthetic records to report")
    parser.add_argument("--million-dsn", help="an empty PostgreSQL database for them too")
    parser.add_argument("--out", help="keep the stores in this folder (default: a temp one)")
    args = parser.parse_args(argv)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    work = Path(args.out or tempfile.mkdtemp(prefix="agent-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    for what, code, figure in rows(args, work):
        print(f"| {what} | {code} | {figure} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
