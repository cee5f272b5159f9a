"""What `curator serve` does to its own process before serving: GC settings, a slimmer
tiktoken, and what startup made frozen. Process-wide, so checked in a child interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import gc, json, pickle
    import tiktoken
    from proxy.config.loader import default_config
    from proxy.serving.server import GC_YOUNG_THRESHOLD, prepare_process

    text = "Hello, wörld! def f(x): return x ** 2  # 🤖"
    before = tiktoken.get_encoding("o200k_base").encode(text)
    prepare_process(default_config())
    enc = tiktoken.get_encoding("o200k_base")
    print(json.dumps({
        "young": gc.get_threshold()[0] == GC_YOUNG_THRESHOLD,
        "slim": len(enc._mergeable_ranks) == 0,
        "same_tokens": enc.encode(text) == before,
        "decodes": enc.decode(before) == text,
        "pickles": pickle.loads(pickle.dumps(enc)).encode(text) == before,
    }))
    """
)


def test_serving_process_is_prepared_and_tokenizes_the_same() -> None:
    # tiktoken's files are in its cache even offline: tests/conftest.py rebuilds them.
    out = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == dict.fromkeys(result, True), result
    assert set(result) == {"young", "slim", "same_tokens", "decodes", "pickles"}


STARTED_CHILD = textwrap.dedent(
    """
    import asyncio, gc, json, os, tempfile
    os.chdir(tempfile.mkdtemp())  # the default config's SQLite audit goes here
    from proxy.config.loader import default_config
    from proxy.serving.server import build_app

    async def main():
        app = build_app(default_config())
        async with app.router.lifespan_context(app) as state:
            counter = state["edge"].current.curation.counter
            cache = state["audit"]._building._builder._cache
            seen = {id(o) for o in gc.get_objects()}
            return {
                "counts": id(counter._cache._data) not in seen,
                "plans": id(counter._plans._data) not in seen,
                "audit_messages": id(cache.items) not in seen,
            }

    print(json.dumps(asyncio.run(main())))
    """
)


def test_the_worker_caches_are_out_of_the_collectors_sight_once_started() -> None:
    # Every full collection walked these (each thread stopped meanwhile); gc.get_objects()
    # lists what it walks, not what gc.freeze() moved aside.
    out = subprocess.run(
        [sys.executable, "-c", STARTED_CHILD],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"counts": True, "plans": True, "audit_messages": True}
