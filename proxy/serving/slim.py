"""Give back the memory the tokenizers needed only to load (`curator serve` only).

- tiktoken: each Encoding keeps its 100k-200k entry `mergeable_ranks` dict (~28 MB for
  o200k_base) beside the Rust tokenizer built from it.
- rs_bpe: its vocabularies are compiled into its extension module; building a tokenizer
  reads ~32 MB of it (o200k_base) once, and those file pages then count in the process's
  RSS for good. They are clean pages of a read-only mapping of the file, so telling the
  kernel it may drop them (madvise MADV_DONTNEED) cannot change what the process reads:
  a page touched again is read back from the file. Only mappings that /proc/self/smaps
  reports wholly clean are released; a relocated (dirty) page would come back unrelocated.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from pathlib import Path

log = logging.getLogger("curator.server")

MADV_DONTNEED = 4
RELEASE_MIN_KB = 1024
"""Mappings smaller than this are not worth a system call."""


def slim_tiktoken() -> int:
    """Drop the Python copy of each loaded tiktoken vocabulary; returns how many went.

    tiktoken reads `_mergeable_ranks` only to pickle an encoding that is not registered;
    registered ones (all of tiktoken's own) pickle by name. Encodings loaded later (a
    model's first request) keep theirs.
    """
    try:
        from tiktoken import registry
    except ImportError:
        return 0
    slimmed = 0
    for name, enc in list(registry.ENCODINGS.items()):
        ranks = getattr(enc, "_mergeable_ranks", None)
        if ranks and registry.ENCODINGS.get(name) is enc:
            enc._mergeable_ranks = {}
            slimmed += 1
    return slimmed


def release_rs_bpe_pages() -> int:
    """Release the clean pages of rs_bpe's extension module; returns the KB released."""
    module = sys.modules.get("rs_bpe.bpe")
    path = getattr(module, "__file__", None)
    if path is None or not sys.platform.startswith("linux"):
        return 0
    try:
        return release_clean_mappings(str(Path(path).resolve()))
    except (OSError, AttributeError, ValueError):  # no /proc, no libc: keep the pages
        log.debug("could not release rs_bpe's pages", exc_info=True)
        return 0


def release_clean_mappings(path: str, smaps: str = "/proc/self/smaps") -> int:
    """MADV_DONTNEED every read-only mapping of `path` with no dirty page; KB released."""
    libc = ctypes.CDLL(None, use_errno=True)
    madvise = libc.madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    released = 0
    for start, stop, rss_kb in _clean_read_only(path, Path(smaps).read_text()):
        if rss_kb >= RELEASE_MIN_KB and madvise(start, stop - start, MADV_DONTNEED) == 0:
            released += rss_kb
    return released


def _clean_read_only(path: str, smaps: str) -> list[tuple[int, int, int]]:
    """(start, stop, RSS in KB) of each mapping of `path` that is read-only and clean."""
    found = []
    current: dict[str, int] | None = None
    for line in smaps.splitlines():
        fields = line.split()
        if not fields:
            continue
        if not fields[0].endswith(":"):  # a mapping's header: range perms offset dev inode path
            current = None
            if len(fields) >= 6 and fields[5] == path and "w" not in fields[1]:
                start, stop = (int(x, 16) for x in fields[0].split("-"))
                current = {"start": start, "stop": stop}
                found.append(current)
        elif current is not None and len(fields) >= 2 and fields[1].isdigit():
            current[fields[0][:-1]] = int(fields[1])
    return [
        (m["start"], m["stop"], m.get("Rss", 0))
        for m in found
        if m.get("Private_Dirty", 1) == 0 and m.get("Shared_Dirty", 1) == 0
    ]
