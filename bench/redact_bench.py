"""Redaction scales linearly: adversarial inputs from 128 KiB to 1 MiB, time ratios printed.

Run: `.venv/bin/python -m bench.redact_bench [--check]`.
For each input family the best-of-N time is measured at each size, and the ratio of each
doubling is printed: linear time gives ~2.0, quadratic ~4.0. `--check` exits 1 when a
doubling costs more than `MAX_DOUBLING` (timing belongs here, never in a pass/fail test).
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import sys
import time
from collections.abc import Callable, Mapping

from proxy.observability.audit.redact import Redactor

KIB = 1024
SIZES = (128 * KIB, 256 * KIB, 512 * KIB, 1024 * KIB)
MAX_DOUBLING = 3.0
"""Above this a doubling is not linear (noise on a busy box stays well under it)."""


def _fill(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def secrets_text() -> str:
    """One real-looking secret of each kind, built at run time."""
    b64 = "MIIEowIBAAKCAQEAx4Xf9qLm0a1Bc2De3Fg4Hi5Jk6Lm7No8Pq9Rs0Tu1Vw2Xy3Z+/=="
    pem = "-----BEGIN RSA PRIVATE KEY-----\n" + f"{b64}\n" * 3 + "-----END RSA PRIVATE KEY-----"
    return " ".join(
        (
            "sk-proj-" + "Ab1_-x" * 8,
            "sk-ant-api03-" + "Zz9_-a" * 6,
            "AKIA" + "Q2HX7KQ4RZ3MBC5D",
            "ghp_" + "a1B2c3D4e5" * 4,
            "xoxb-" + "123456789012-1234567890123-aBcDeFgHiJ",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.SflKxwRJSMeKKF2QT4fwpMeJf36POk",
            "Bearer tk.Vq8Lm2Np4Rs6Tu8Wx0Yz2Ab",
            pem,
        )
    )


SECRET_UNITS: Mapping[str, str] = {
    "dense secrets": secrets_text() + "\n",
    "JSON-escaped secrets": json.dumps(json.dumps(secrets_text())),
}
"""Families made of whole copies of the eight secrets: each copy must yield 8 redactions."""

FAMILIES: Mapping[str, Callable[[int], str]] = {
    "uppercase run": lambda n: "A" * n,
    "repeated AKIA": lambda n: _fill("AKIA", n),
    "unclosed PEM header": lambda n: "-----BEGIN RSA PRIVATE KEY-----" + "A" * n,
    "repeated PEM headers": lambda n: _fill("-----BEGIN RSA PRIVATE KEY-----\n", n),
    "BEGIN spam": lambda n: _fill("-----BEGIN ", n),
    "backslash run": lambda n: "\\" * n,
    "unicode escapes": lambda n: _fill("\\u0041", n),
    "repeated sk-proj-": lambda n: _fill("sk-proj-", n),
    "near-miss keys": lambda n: _fill("sk-" + "a" * 19 + " ", n),
    "repeated eyJ.": lambda n: _fill("eyJa.", n),
    "repeated Bearer": lambda n: _fill("Bearer ", n),
    "repeated xoxb-": lambda n: _fill("xoxb-", n),
    "escape-glued keys": lambda n: _fill("%3Dsk-%3DeyJ%253DAKIA%3Dghp_", n),
    "underscore-glued keys": lambda n: _fill("_sk-proj-_eyJ_ghp_", n),
    "repeated secret_access_key=": lambda n: _fill("secret_access_key=", n),
    "repeated Basic": lambda n: _fill("Basic dXNlcjpw ", n),
    "userinfo without @": lambda n: "://u:" + "p" * n,
    "escaped unclosed PEM": lambda n: "-----BEGIN RSA PRIVATE KEY-----" + _fill("\\nAAAA", n),
    # Not adversarial: ordinary code that names what detectors look for, and no secret.
    "code naming needles": lambda n: _fill(
        "    run_task-queue(basic_config, url='http://example.com/session')  "
        "# reads AWS_SESSION_TOKEN\n",
        n,
    ),
    **{name: functools.partial(_fill, unit) for name, unit in SECRET_UNITS.items()},
}


def best_s(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def measure(redactor: Redactor, make: Callable[[int], str], repeat: int) -> list[float]:
    """Seconds to redact the family's input at each of `SIZES`."""
    times = []
    for size in SIZES:
        text = make(size)
        times.append(best_s(functools.partial(redactor.text, text), repeat))
    return times


def doublings(times: list[float]) -> list[float]:
    return [later / max(earlier, 1e-9) for earlier, later in itertools.pairwise(times)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--check", action="store_true", help=f"exit 1 if a doubling > {MAX_DOUBLING}"
    )
    args = parser.parse_args(argv)
    redactor = Redactor.build()
    sizes = "  ".join(f"{s // KIB:>6} KiB" for s in SIZES)
    print(f"{'input':<22} {sizes}   doubling ratios")
    worst = 0.0
    for name, make in FAMILIES.items():
        times = measure(redactor, make, args.repeat)
        ratios = doublings(times)
        worst = max(worst, *ratios)
        cells = "  ".join(f"{t * 1e3:7.2f} ms" for t in times)
        print(f"{name:<22} {cells}   {' '.join(f'{r:4.2f}' for r in ratios)}")
    print(f"worst doubling: {worst:.2f} (linear ~2.0, quadratic ~4.0)")
    return 1 if args.check and worst > MAX_DOUBLING else 0


if __name__ == "__main__":
    sys.exit(main())
