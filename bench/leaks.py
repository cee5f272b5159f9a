"""What a process tree holds, from /proc: descriptors, memory, and TCP connections to a port.

Linux only; used by the soak to show that a proxy returns to its baseline after load.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.procs import tree_rss


@dataclass(frozen=True, slots=True)
class Sample:
    """The proxy process tree's descriptors and memory, and its upstream connections."""

    fds: int
    upstream_connections: int
    close_wait: int
    rss: int

    @property
    def own_fds(self) -> int:
        """Descriptors other than pooled upstream connections (which expire by themselves)."""
        return self.fds - self.upstream_connections


def tree_pids(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        for task in Path(f"/proc/{current}/task").glob("*/children"):
            todo.extend(int(c) for c in task.read_text().split())
    return pids


def tcp_connections(port: int) -> tuple[int, int]:
    """(held, close_wait) connections whose remote end is loopback:`port`."""
    held = close_wait = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if int(fields[2].rsplit(":", 1)[1], 16) != port:
                continue
            held += fields[3] in ("01", "08")
            close_wait += fields[3] == "08"
    return held, close_wait


def sample(pid: int, upstream_port: int) -> Sample:
    fds = sum(len(list(Path(f"/proc/{p}/fd").iterdir())) for p in tree_pids(pid))
    held, close_wait = tcp_connections(upstream_port)
    return Sample(fds, held, close_wait, tree_rss(pid))
