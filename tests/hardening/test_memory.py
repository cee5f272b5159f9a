"""What stays in memory per request stays small: the audit message cache holds each stored
message at its real size (orjson's results keep a 4 KiB allocation whatever their length,
which made every cached one-line message cost 4 KiB: the soak's RSS grew by that much per
request)."""

from __future__ import annotations

import gc
import tracemalloc

from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.redact import Redactor
from tests.factories import audited

COUNT = 2000


def test_cached_audit_messages_cost_their_size_not_a_buffer() -> None:
    builder = RecordBuilder(Redactor.build())
    entries = [
        audited(id=str(i), time=0.0, original=[{"role": "user", "content": f"m-{i}"}])
        for i in range(COUNT)
    ]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        records = [builder.build(entry) for entry in entries]
        del records  # what remains is what the cache holds
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    kept = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert kept / COUNT < 1024, f"{kept / COUNT:.0f} bytes kept per cached message"
