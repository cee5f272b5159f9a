"""JSONL audit sink: one self-contained JSON object per line, for log shippers.

Each line goes out in a single write() on a descriptor opened with O_APPEND, so several
worker processes appending to one file never interleave their lines. Path "-" writes to
stdout (containers); there a line longer than the pipe buffer (PIPE_BUF, 4 KB on Linux)
may still be split by other writers, which is the pipe's limit, not ours.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.observability.audit.entry import AuditRecord
from proxy.observability.audit.sinks.base import STDOUT, Retention, Sink, SinkType


class JsonlSink:
    """Appends records as JSON lines to a file (or stdout). Used by one thread only."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None

    def _descriptor(self) -> int:
        # Opened lazily in the writer thread; a failure is retried on the next record.
        if self._fd is None:
            if self.path == STDOUT:
                self._fd = 1
            else:
                flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
                self._fd = os.open(self.path, flags, 0o600)
        return self._fd

    def write(self, record: AuditRecord) -> None:
        self.write_many((record,))

    def write_many(self, records: Sequence[AuditRecord]) -> None:
        fd = self._descriptor()
        for record in records:
            # One write() a line, never one for several: other workers' lines may land
            # between any two.
            line = record.to_json() + b"\n"
            written = os.write(fd, line)
            # A regular file takes the whole line or fails; a pipe may take part of it.
            while written < len(line):
                written += os.write(fd, line[written:])

    def prune(self, now: float | None = None) -> int:  # noqa: ARG002 (the Sink protocol)
        """JSONL files are rotated by the log tooling that reads them; nothing to do here."""
        return 0

    def close(self) -> None:
        if self._fd is not None and self._fd != 1:
            os.close(self._fd)
        self._fd = None


def _open(location: str, _options: Mapping[str, Any], _retention: Retention) -> Sink:
    return JsonlSink(location)


SINK = SinkType("jsonl", _open, default_path="curator-audit.jsonl")
