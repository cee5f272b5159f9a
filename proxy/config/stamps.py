"""A config's files and their stamps, which the reload watcher compares (`proxy.serving.reload`)."""

from __future__ import annotations

import os
import types
from collections.abc import Mapping

from policies.errors import ConfigError, Problem

FileStamp = tuple[int, int, int]
"""(mtime_ns, size, inode): when it changes, the file did (renamed-in copies included)."""
NO_SOURCES: Mapping[str, FileStamp | None] = types.MappingProxyType({})


def file_stamp(path: str) -> FileStamp | None:
    """The file's stamp now, None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class ConfigFileError(ConfigError):
    """`load_config`'s error: the problems, plus every file the config named with its stamp
    (so a reload watcher also notices the fix of a policy file the running config lacks)."""

    def __init__(self, problems: list[Problem], sources: Mapping[str, FileStamp | None]) -> None:
        super().__init__(problems)
        self.sources = sources
