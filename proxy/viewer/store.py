"""Opening the audit store the viewer reads, once per request."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from proxy.config.audit import masked_location
from proxy.observability.audit.readers.query import Reader
from proxy.observability.audit.readers.registry import open_reader as open_store
from proxy.viewer.app import OpenReader

Target = tuple[str, str | None, Mapping[str, Any]]
"""(location, the sink that wrote it or None, the sink's options), as `curator audit` has it."""


def open_reader(
    path: str, sink: str | None = None, options: Mapping[str, Any] | None = None
) -> Reader:
    """A reader for the store at `path`, chosen as `curator audit` chooses it (the sink,
    else the URL's scheme or the file's suffix: `readers.registry`). Raises
    FileNotFoundError when there is no store yet."""
    try:
        return cast(Reader, open_store(path, sink, options))
    except FileNotFoundError:
        raise FileNotFoundError(f"no audit records yet at {masked_location(path)}") from None


def opener(
    path: str, sink: str | None = None, options: Mapping[str, Any] | None = None
) -> OpenReader:
    """`open_reader` bound to its store, for `Viewer`."""

    def open_it() -> Reader:
        return open_reader(path, sink, options)

    return open_it
