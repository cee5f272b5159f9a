"""Versioned schema migrations, one mechanism for every SQL store.

A store records the version it is at; `pending` says which migrations take it to the
newest. Each store applies them inside one transaction that first takes an exclusive lock
(SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory lock), then re-reads the version: of
several replicas starting at once, the first migrates and the others find nothing to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


class SchemaTooNew(Exception):
    """The store was migrated by a newer proxy; this one must not write to it."""


@dataclass(frozen=True, slots=True)
class Migration:
    """Statements that take a store from `version - 1` to `version`."""

    version: int
    about: str
    statements: tuple[str, ...]


def latest(migrations: Sequence[Migration]) -> int:
    return migrations[-1].version if migrations else 0


def pending(current: int, migrations: Sequence[Migration], *, where: str) -> list[Migration]:
    """The migrations after `current`, in order; raises SchemaTooNew past the newest."""
    if current > latest(migrations):
        raise SchemaTooNew(
            f"{where}: audit schema {current} is newer than this proxy's ({latest(migrations)})"
        )
    return [m for m in migrations if m.version > current]
