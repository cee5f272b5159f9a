"""`curator simulate --since ...`: the requests come straight from the audit store, the one
`curator audit` reads (`--path`, else the config's `audit:` section), so a PostgreSQL store
shared by every replica is simulated without an export in between."""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Iterator
from typing import Any

from proxy.cli.audit import audit_target, conversation_of, open_store
from proxy.cli.simulate_input import Request, SimulateError, stream_records
from proxy.cli.simulate_model import StoreQuery
from proxy.config.audit import masked_location
from proxy.observability.audit.readers.query import time_window


def stored_requests(query: StoreQuery) -> Iterator[Request]:
    """The recorded requests `query` selects, oldest first, read one record at a time.
    Raises `SimulateError` for a bad time or a store that cannot be named; the store's own
    failures propagate."""
    try:
        since, until = time_window(query.since, query.until)
    except ValueError as exc:
        raise SimulateError(str(exc)) from None
    args = argparse.Namespace(config=query.config, path=query.path, sink=query.sink)
    where = masked_location(audit_target(query.config, query.path, query.sink).location)
    with open_store(args) as store:
        records = (r for r in store.between(since, until) if _wanted(query, r))
        first = next(records, None)
        if first is None:
            raise SimulateError(f"{where}: no audit record from {query.since} on matches")
        yield from stream_records(where, itertools.chain([first], records))


def _wanted(query: StoreQuery, record: dict[str, Any]) -> bool:
    return query.conversation is None or conversation_of(record).startswith(query.conversation)
