"""Replay real agent trajectories step by step through each preset, and price and grade it.

    python -m bench.trajectories [DIR] [--windows 32768,131072] [--presets default,...]
                                 [--policy NAME=FILE.yaml ...] [--jobs N] [--per-run] [--json]

DIR (default `../shared/trajectories/data`) holds histories written by real coding agents,
one JSON file each (`messages`, `tools`, `edit_patch`: see that folder's README). For every
assistant message at index *i*, the agent was sent `messages[:i]`: the benchmark sends
exactly that through each strategy, as the agent would have through the proxy, and asks:

- **tokens**: prompt tokens sent (tool definitions and reply priming included), as a share
  of sending the whole history every time;
- **bill**: what a provider with prefix caching charges, as a share of the whole history's
  bill. A request's cached tokens are the longest prefix of whole blocks (the tool
  definitions, then each message) it shares with the *previous* request, rounded as OpenAI
  rounds (nothing under 1,024 tokens, then steps of 128), billed at 10% of the input price;
  the rest at the full price. `bill+w` prices the uncached tokens again as cache writes at
  1.25x, as Anthropic bills them. Where the whole history does not fit the window (some of
  its requests would be rejected), `vs naive` compares with the honest baseline, the naive
  window: drop the oldest units until the newest fit;
- **refs lost**: of what the agent's next message names (`bench.references`: paths,
  identifiers, line numbers, quoted strings) and the whole history contained, the share
  the curated prompt no longer contained;
- **edit lines lost**: of the original lines the agent's final patch edits (or edits
  next to) that the whole history showed at a step, the share the curated prompt hid;
- **rejected**: requests a strict upstream refuses (invalid tool-call ordering, or more
  prompt tokens than the window minus the reply reserve).

Curation runs in-process, through the policies exactly as `curator serve` loads them
(`policies.loader`), with the model's window set by a `models:`-style override and the
o200k_base encoding. Totals are summed over all runs (long runs weigh more, as they cost
more). `--per-run` adds a line per run and strategy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.references import Lookup, edit_lines, extract, message_text
from bench.trajectory_table import FULL, NAIVE, Tally, rows, table
from policies.invariants import ordering_errors
from policies.loader import load_policy_file, load_preset
from policies.messages import Message, role, units
from policies.models import ModelInfo, ModelTable
from policies.policy import Policy
from policies.prefix_cache import PrefixCache, Prompt, prompt_of
from policies.tokens import REPLY_PRIMING, TokenCounter

DEFAULT_DIR = Path(__file__).resolve().parent.parent.parent / "shared" / "trajectories" / "data"
MODEL = "trajectory-agent"
WINDOWS = (32_768, 131_072)
PRESETS = ("default", "coding-agent", "chat")
CACHED_PRICE, WRITE_PRICE = 0.1, 1.25

Body = dict[str, Any]
Strategy = Callable[[Body], list[Message]]


@dataclass(frozen=True, slots=True)
class Run:
    """One trajectory: its id, tools, whole history and the agent's final patch."""

    id: str
    tools: tuple[Mapping[str, Any], ...]
    messages: tuple[Message, ...]
    patch: str

    @classmethod
    def load(cls, path: Path) -> Run:
        data = json.loads(path.read_text(encoding="utf-8"))
        tools = tuple(data.get("tools") or ())
        return cls(str(data["id"]), tools, tuple(data["messages"]), data.get("edit_patch") or "")

    def steps(self) -> list[int]:
        """Index of every assistant message that has a history before it."""
        return [i for i, m in enumerate(self.messages) if i and role(m) == "assistant"]


def counter_for(window: int) -> TokenCounter:
    return TokenCounter(
        ModelTable.with_overrides([(MODEL, ModelInfo(window, encoding="o200k_base"))])
    )


def strategies(
    names: Sequence[str], files: Mapping[str, str], counter: TokenCounter
) -> dict[str, Strategy]:
    """The whole history, the naive window, then each named preset and policy file."""
    out: dict[str, Strategy] = {
        FULL: lambda body: list(body["messages"]),
        NAIVE: lambda body: naive_window(body, counter),
    }
    for name in names:
        out[name] = _curating(load_preset(name), counter)
    for name, path in files.items():
        out[name] = _curating(load_policy_file(path, name=name), counter)
    return out


def _curating(policy: Policy, counter: TokenCounter) -> Strategy:
    def curate(body: Body) -> list[Message]:
        return policy.curate(body["messages"], body, counter).messages

    return curate


def limit(body: Body, counter: TokenCounter) -> int:
    """Prompt tokens a strict upstream accepts: the window minus the reply reserve."""
    budget = Policy("limit").budget(body, counter)
    return budget.context_window - budget.reserve_output


def naive_window(body: Body, counter: TokenCounter) -> list[Message]:
    """System messages, then the newest whole units that fit: what a hand-rolled trimmer does."""
    messages: list[Message] = body["messages"]
    room = Policy("naive").budget(body, counter).messages - REPLY_PRIMING
    sizes = counter.count_each(messages, MODEL)
    over = sum(sizes) - room
    dropped: set[int] = set()
    for unit in units(messages)[:-1]:
        if over <= 0:
            break
        group = unit.indexes()
        if any(role(messages[i]) == "system" for i in group):
            continue
        dropped.update(group)
        over -= sum(sizes[i] for i in group)
    return [m for i, m in enumerate(messages) if i not in dropped]


def replay_run(
    run: Run, window: int, names: Sequence[str], files: Mapping[str, str]
) -> dict[str, Tally]:
    """Every strategy's tally over one run's steps."""
    counter = counter_for(window)
    chosen = strategies(names, files, counter)
    texts = [message_text(m) for m in run.messages]
    edits = edit_lines(run.patch)
    tallies = {name: Tally() for name in chosen}
    previous: dict[str, Prompt | None] = dict.fromkeys(chosen)
    cache = PrefixCache()
    for i in run.steps():
        body: Body = {"model": MODEL, "messages": list(run.messages[:i]), "tools": list(run.tools)}
        whole = Lookup("\n".join(texts[:i]))
        refs = [(k, r) for k, r in extract(run.messages[i]).all() if whole.has(k, r)]
        shown = [line for line in edits if line in whole.text]
        allowed = limit(body, counter)
        for name, strategy in chosen.items():
            sent = strategy(body)
            prompt = prompt_of(sent, counter, MODEL, run.tools)
            tally = tallies[name]
            _price(tally, prompt, previous[name], cache)
            previous[name] = prompt
            seen = Lookup(_text(sent, run.messages[:i], texts))
            tally.refs += len(refs)
            tally.refs_lost += sum(not seen.has(k, r) for k, r in refs)
            tally.edit_seen += len(shown)
            tally.edit_lost += sum(line not in seen.text for line in shown)
            over = prompt.tokens > allowed
            tally.over_window += over
            tally.rejected += over or bool(ordering_errors(sent))
    return tallies


def _text(sent: Sequence[Message], originals: Sequence[Message], texts: Sequence[str]) -> str:
    known = {id(m): t for m, t in zip(originals, texts, strict=False)}
    return "\n".join(known.get(id(m)) or message_text(m) for m in sent)


def _price(tally: Tally, prompt: Prompt, previous: Prompt | None, cache: PrefixCache) -> None:
    shared = 0
    if previous is not None:
        for mine, theirs in zip(prompt.blocks, previous.blocks, strict=False):
            if mine.key != theirs.key:
                break
            shared += mine.tokens
    cached = cache.cacheable(min(shared, prompt.tokens))
    fresh = prompt.tokens - cached
    tally.requests += 1
    tally.tokens += prompt.tokens
    tally.cached += cached
    tally.bill += fresh + cached * CACHED_PRICE
    tally.bill_writes += fresh * WRITE_PRICE + cached * CACHED_PRICE


def _job(
    args: tuple[Path, int, tuple[str, ...], dict[str, str]],
) -> tuple[str, int, dict[str, Tally]]:
    path, window, names, files = args
    run = Run.load(path)
    return run.id, window, replay_run(run, window, names, files)


def replay_all(
    paths: Sequence[Path],
    windows: Sequence[int],
    names: Sequence[str],
    files: Mapping[str, str],
    jobs: int,
) -> list[tuple[str, int, dict[str, Tally]]]:
    work = [(p, w, tuple(names), dict(files)) for w in windows for p in paths]
    if jobs <= 1:
        return [_job(w) for w in work]
    with ProcessPoolExecutor(jobs) as pool:
        return list(pool.map(_job, work))


def totals(results: Iterable[tuple[str, int, dict[str, Tally]]]) -> dict[int, dict[str, Tally]]:
    out: dict[int, dict[str, Tally]] = {}
    for _, window, tallies in results:
        into = out.setdefault(window, {})
        for name, tally in tallies.items():
            into.setdefault(name, Tally()).add(tally)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.trajectories",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "dir", nargs="?", default=str(DEFAULT_DIR), help="folder of trajectory JSON files"
    )
    parser.add_argument(
        "--windows", default=",".join(map(str, WINDOWS)), help="context windows, comma-separated"
    )
    parser.add_argument("--presets", default=",".join(PRESETS), help="shipped presets to replay")
    parser.add_argument(
        "--policy",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="also replay a policy YAML file under NAME (repeatable)",
    )
    parser.add_argument(
        "--only",
        default="",
        help="replay only runs whose file name contains one of these (comma-separated)",
    )
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes")
    parser.add_argument("--per-run", action="store_true", help="a line per run and strategy too")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args(argv)
    folder = Path(args.dir)
    only = args.only.split(",")
    paths = (
        sorted(p for p in folder.glob("*.json") if any(o in p.name for o in only))
        if folder.is_dir()
        else []
    )
    if not paths:
        parser.error(f"no trajectories in {folder}: pass the folder (../shared/trajectories/data)")
    files = dict(item.split("=", 1) for item in args.policy)
    names = [n for n in args.presets.split(",") if n]
    windows = [int(w) for w in args.windows.split(",") if w]
    results = replay_all(paths, windows, names, files, args.jobs)
    found = rows(totals(results))
    if args.json:
        print(json.dumps([asdict(r) for r in found], indent=2))
        return 0
    steps = sum(t[FULL].requests for _, w, t in results if w == windows[0])
    print(
        f"{len(paths)} trajectories, {steps:,} steps each window; "
        f"cached input at {CACHED_PRICE:g}, cache writes at {WRITE_PRICE:g} in bill+w"
    )
    print(table(found))
    if args.per_run:
        for run_id, window, tallies in results:
            print()
            print(f"{run_id} @ {window // 1024}k")
            print(table(rows({window: tallies})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
