"""Commands that write to stdout end like Unix tools when their reader leaves early.

`curator audit export | head -1`: `head` exits after one line, the next write raises
BrokenPipeError, and without this Python prints a traceback (or "Exception ignored" at
exit). Here the command stops quietly with status 141, what a shell reports for a
process that SIGPIPE ended, so `set -o pipefail` scripts see it as `cat` or `seq` would.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

BROKEN_PIPE_STATUS = 141
"""128 + SIGPIPE (13)."""


def run_to_stdout(command: Callable[[], int]) -> int:
    """`command()`'s status, or BROKEN_PIPE_STATUS, quietly, when stdout's reader has gone."""
    try:
        try:
            return command()
        finally:
            # Flushed here, not at exit, so a broken pipe surfaces inside the `try`.
            sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit; pointing it at /dev/null keeps that quiet.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return BROKEN_PIPE_STATUS
