"""The `curator` command: `serve` runs the proxy, `check` validates and explains a config,
`simulate` shows offline what a policy would do to recorded requests, `audit` reads the
audit log (`list | show | diff | export`, from `proxy.cli.audit`).

Each subcommand is a parser entry plus a handler `(args) -> exit code`, so `simulate` and
`audit` slot in beside them.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from policies.errors import ConfigError
from policies.fast_bpe import tokenizer_choice
from policies.urls import masked_url
from proxy.cli.audit import add_subparsers as add_audit_subparsers
from proxy.cli.audit import handled_as
from proxy.cli.pipes import run_to_stdout
from proxy.cli.report import add_parser as add_report_parser
from proxy.config.loader import Config, default_config, load_config
from proxy.config.render import format_config
from proxy.config.upstreams import cleartext_warnings
from proxy.observability.audit.readers.registry import READERS as SINK_NAMES

DEFAULT_CONFIG = "config.yaml"
DISTRIBUTION = "context-curator"
log = logging.getLogger("curator.cli")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `curator` console script; returns the process exit code."""
    return run_to_stdout(lambda: _run(argv))


def _run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.handler(args)
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="curator",
        description="An OpenAI-compatible proxy that curates chat context before forwarding.",
    )
    parser.add_argument("--version", action="version", version=f"curator {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser("serve", help="run the proxy")
    _add_config_arg(serve)
    serve.add_argument("--host", help="interface to listen on (default: server.host)")
    serve.add_argument(
        "--port", type=_bounded(1, 65535), help="port to listen on (default: server.port)"
    )
    serve.add_argument(
        "--workers", type=_bounded(1, None), help="worker processes (default: server.workers)"
    )
    serve.set_defaults(handler=_serve)
    check = commands.add_parser("check", help="validate a config and show its routes and policies")
    _add_config_arg(check)
    check.add_argument(
        "--host", help="check as `serve --host HOST` would start (default: server.host)"
    )
    check.set_defaults(handler=_check)
    _add_simulate(commands)
    add_audit_subparsers(commands)
    commands.choices["audit"].set_defaults(handler=_audit)
    add_report_parser(commands)
    return parser


def package_version() -> str:
    """The installed distribution's version (pyproject's `version`, from its metadata)."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "unknown (not installed)"


def _add_simulate(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    simulate = commands.add_parser(
        "simulate",
        help="show offline what a policy does to recorded requests and what they would cost",
        description="Curate a chat request (JSON) or a conversation's successive requests "
        "(JSONL: requests or `curator audit export` records) as the proxy would, offline, "
        "and show each curator's actions, tokens before/after and the prefix-cache cost.",
    )
    _add_config_arg(simulate)
    target = simulate.add_mutually_exclusive_group()
    target.add_argument("--route", help="use this route's policy (default: the routed one)")
    target.add_argument("--policy", help="use this named policy, or preset:<name>")
    simulate.add_argument(
        "input", metavar="INPUT", nargs="?", help="a JSON or JSONL file, or - for stdin"
    )
    stored = simulate.add_argument_group(
        "from the audit store (instead of INPUT)",
        "the store `curator audit` reads: --path, else the config's audit: section",
    )
    stored.add_argument("--since", help="simulate the records from this time: ISO, or 1h, 2d ago")
    stored.add_argument("--until", help="... up to this time (default: now)")
    stored.add_argument("--path", help="audit store: a .db or .jsonl file, or a postgresql:// URL")
    stored.add_argument("--sink", choices=sorted(SINK_NAMES), help="which store --path is")
    stored.add_argument("--conversation", help="only this conversation (a key or its prefix)")
    simulate.add_argument("--model", help="replace each request's model")
    simulate.add_argument("--diff", action="store_true", help="show a diff of the messages")
    simulate.add_argument("--json", action="store_true", help="print JSON for machines")
    simulate.add_argument(
        "--summary",
        action="store_true",
        help="totals per route and policy instead of a report per request",
    )
    simulate.add_argument(
        "--allow-calls",
        action="store_true",
        help="let a summarizer call its model (else a placeholder stands in for the summary)",
    )
    simulate.add_argument(
        "--cached-price",
        type=_fraction,
        default=0.1,
        metavar="F",
        help="price of a cached input token, as a fraction of the input price (default 0.1)",
    )
    simulate.set_defaults(handler=_simulate)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number from 0 to 1, got {text}")
    return value


def _add_config_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="PATH",
        help=f"config file (default: ./{DEFAULT_CONFIG}, else built-in defaults)",
    )


def _bounded(low: int, high: int | None) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low or (high is not None and value > high):
            upper = f" to {high}" if high is not None else " or more"
            raise argparse.ArgumentTypeError(f"expected {low}{upper}, got {value}")
        return value

    return parse


def _load(config_arg: str | None) -> tuple[Config, str | None]:
    """The config to use and the file it came from (None for built-in defaults)."""
    if config_arg is None and not Path(DEFAULT_CONFIG).is_file():
        config = default_config()
        upstream = next(iter(config.upstreams.values())).base_url
        log.info(
            "no ./%s found: using built-in defaults (upstream %s, policy preset 'default')",
            DEFAULT_CONFIG,
            masked_url(upstream),
        )
        return config, None
    path = config_arg or DEFAULT_CONFIG
    return load_config(path), path


def _serve(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(message)s")
    try:
        config, path = _load(args.config)
    except ConfigError as exc:
        _print_problems(exc)
        return 1
    refusal = startup_problem(config, args.host)
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return 1
    for warning in cleartext_warnings(config.upstreams.values()):
        log.warning("%s", warning)
    from proxy.serving.server import serve  # the HTTP stack loads only for `serve`

    serve(config, host=args.host, port=args.port, workers=args.workers, config_path=path)
    return 0


def _check(args: argparse.Namespace) -> int:
    try:
        config, _ = _load(args.config)
    except ConfigError as exc:
        _print_problems(exc)
        return 1
    problem = startup_problem(config, args.host)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    for warning in cleartext_warnings(config.upstreams.values()):
        print(warning, file=sys.stderr)
    print(format_config(config))
    return 0


def startup_problem(config: Config, host: str | None) -> str | None:
    """Why `serve` would refuse to start with `config` on `host` (default: server.host).

    `check` runs exactly this too, so `serve` refuses no config `check` passes; starting can
    still fail on what only binding finds (the port in use)."""
    from proxy.serving.guard import bind_refusal

    return _tokenizer_problem() or bind_refusal(config, host or config.server.host)


def _tokenizer_problem() -> str | None:
    """A bad `CURATOR_TOKENIZER`, refused up front rather than counted with estimates."""
    try:
        tokenizer_choice()
    except ValueError as exc:
        return f"curator: {exc}"
    return None


@handled_as("simulate")
def _simulate(args: argparse.Namespace) -> int:
    if (args.input is None) == (args.since is None):
        return _fail_simulate("give either INPUT or --since (to read the audit store)")
    try:
        config, _ = _load(args.config)
    except ConfigError as exc:
        _print_problems(exc)
        return 1
    from proxy.cli import simulate
    from proxy.cli.simulate_model import Options, StoreQuery

    store = None
    if args.since is not None:
        store = StoreQuery(
            args.since, args.config, args.until, args.path, args.sink, args.conversation
        )

    options = Options(
        input=args.input or "",
        route=args.route,
        policy=args.policy,
        model=args.model,
        allow_calls=args.allow_calls,
        cached_price=args.cached_price,
        diff=args.diff,
        json=args.json,
        summary=args.summary,
        store=store,
    )
    return simulate.run(config, options)


def _fail_simulate(message: str) -> int:
    print(f"curator simulate: {message}", file=sys.stderr)
    return 2


def _audit(args: argparse.Namespace) -> int:
    """`curator audit ...`: the store named by --path, else by the config's `audit:`."""
    code: int = args.func(args)
    return code


def _print_problems(exc: ConfigError) -> None:
    for problem in exc.problems:
        print(problem, file=sys.stderr)
    count = len(exc.problems)
    print(f"{count} problem{'s' if count != 1 else ''} found.", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
