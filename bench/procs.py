"""Subprocess ownership for the benchmark: start pinned, wait until ready, always clean up.

Every process the benchmark starts gets its own session (process group), so stopping it
also stops whatever it forked (uvicorn workers, nginx workers). `Processes` is a context
manager: leaving it, normally or by an exception, signals every group it started, and
nothing else.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

STOP_GRACE_S = 5.0
REPO_ROOT = Path(__file__).resolve().parent.parent


def python_env() -> dict[str, str]:
    """The environment for child interpreters: ours, with the repository importable."""
    path = os.environ.get("PYTHONPATH")
    return {
        **os.environ,
        "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{path}" if path else str(REPO_ROOT),
    }


class StartError(RuntimeError):
    """A benchmark process exited or did not answer in time."""


@dataclass(frozen=True, slots=True)
class Placement:
    """Which CPUs a process may run on, and its niceness."""

    cpus: frozenset[int] | None = None
    nice: int = 0

    def apply(self) -> None:
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)
        if self.nice:
            os.nice(self.nice)


def placements(pin: bool) -> tuple[Placement, Placement]:
    """(server under test, everything else): the server gets a core of its own.

    On 2 cores the load generator and the upstream share the other core, so they still
    compete with each other; docs/performance.md reports that caveat with the figures.
    """
    cpus = sorted(os.sched_getaffinity(0))
    if not pin or len(cpus) < 2:
        return Placement(), Placement()
    return Placement(frozenset(cpus[:1])), Placement(frozenset(cpus[1:]))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Processes:
    """Starts and owns the benchmark's subprocesses; stops all of them on exit."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self._procs: dict[str, subprocess.Popen[bytes]] = {}

    def __enter__(self) -> Processes:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop(*reversed(list(self._procs)))

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        placement: Placement = Placement(),
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> subprocess.Popen[bytes]:
        log = (self.logdir / f"{name}.log").open("wb")
        try:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**python_env(), **(env or {})},
                cwd=cwd,
                start_new_session=True,
                preexec_fn=placement.apply,
            )
        finally:
            log.close()
        self._procs[name] = proc
        return proc

    def stop(self, *names: str) -> None:
        """Stop these processes together: SIGTERM to every group, then SIGKILL to those still
        running `STOP_GRACE_S` later (one after the other, each up to twice that, a run's
        servers could outlast the 30 s a SIGTERM'd bench is given to exit)."""
        procs = [proc for name in names if (proc := self._procs.pop(name, None)) is not None]
        running = procs
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for proc in running:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, sig)
            deadline = time.monotonic() + STOP_GRACE_S
            running = [proc for proc in running if not _exited(proc, deadline)]
        # Workers that ignored SIGTERM may outlive their leader; the group id is still ours.
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    def log_tail(self, name: str, lines: int = 20) -> str:
        path = self.logdir / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def wait_http(self, name: str, url: str, timeout_s: float) -> None:
        """Poll `url` until it answers 2xx; fail early if the process exits."""
        proc = self._procs[name]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise StartError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(url, timeout=1) as resp,
            ):
                if 200 <= resp.status < 300:
                    return
            time.sleep(0.05)
        raise StartError(
            f"{name} did not answer {url} within {timeout_s:.0f}s:\n{self.log_tail(name)}"
        )

    def pid(self, name: str) -> int:
        return self._procs[name].pid


def _tree(pid: int) -> list[int]:
    """`pid` and all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, ()))
    return found


def tree_rss(pid: int) -> int:
    """Resident memory in bytes of `pid` and all its descendants."""
    total = 0
    for current in _tree(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{current}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by `pid` and its living descendants."""
    ticks = 0
    for current in _tree(pid):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _exited(proc: subprocess.Popen[bytes], deadline: float) -> bool:
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return False
    return True
