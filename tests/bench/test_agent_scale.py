"""`bench.agent_scale` run small: the store is written as the proxy's writer would, and
every command runs and gives a row (figures checked for presence only)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.agent_scale import rows
from bench.agent_store import conversation


def test_an_agent_conversation_grows_and_its_curated_copy_stays_within_its_budget() -> None:
    records = list(conversation(0, turns=4, final_tokens=40_000))
    sizes = [len(r.original) for r in records]
    assert sizes == [4, 6, 8, 10]
    assert records[-1].fields["tokens_before"] > 35_000
    assert all(r.curated is not None and r.curated[:2] == r.original[:2] for r in records)
    assert records[-1].original[2:4] == records[0].original[2:4], "the history is resent"


def test_every_row_is_measured(tmp_path: Path) -> None:
    args = argparse.Namespace(
        agents=1, turns=2, tokens=8_000, before=None, dsn=None, million=200, million_dsn=None
    )
    found = {(what, code): figure for what, code, figure in rows(args, tmp_path)}
    for what in ("export JSONL", "export bundle", "import bundle, SQLite", "report"):
        assert "MB RSS" in found[what, "after"]
    assert "MB RSS" in found["simulate (preset:default)", "after"]
    assert "MB RSS" in found["report, 200 records, SQLite", "after"]
