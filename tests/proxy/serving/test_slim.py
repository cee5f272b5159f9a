"""proxy/serving/slim.py: memory the tokenizers needed only to load is given back, nothing else."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from proxy.serving.slim import _clean_read_only

LIB = "/venv/site-packages/rs_bpe/bpe.so"
SMAPS = f"""\
7f0000000000-7f0000001000 r--p 00000000 fe:00 42      {LIB}
Rss:                   4 kB
Shared_Dirty:          0 kB
Private_Dirty:         0 kB
7f0000001000-7f0000201000 r--p 00001000 fe:00 42      {LIB}
Rss:                2048 kB
Shared_Dirty:          0 kB
Private_Dirty:         0 kB
VmFlags: rd mr mw me sd
7f0000201000-7f0000301000 r--p 00201000 fe:00 42      {LIB}
Rss:                1024 kB
Shared_Dirty:          0 kB
Private_Dirty:       172 kB
7f0000301000-7f0000302000 rw-p 00301000 fe:00 42      {LIB}
Rss:                   4 kB
Shared_Dirty:          0 kB
Private_Dirty:         0 kB
7f0000302000-7f0000402000 r--p 00000000 fe:00 43      /usr/lib/other.so
Rss:                1024 kB
Shared_Dirty:          0 kB
Private_Dirty:         0 kB
7f0000402000-7f0000403000 rw-p 00000000 00:00 0
Rss:                   4 kB
"""


def test_only_clean_read_only_mappings_of_the_library_are_candidates() -> None:
    assert _clean_read_only(LIB, SMAPS) == [
        (0x7F0000000000, 0x7F0000001000, 4),
        (0x7F0000001000, 0x7F0000201000, 2048),
    ]


def run_isolated(code: str) -> str:
    """Run in a fresh interpreter: a wrong madvise would crash it, not the test runner."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps")
def test_rs_bpe_pages_are_released_and_counting_stays_exact() -> None:
    pytest.importorskip("rs_bpe", reason="the [fast] extra is not installed")
    out = run_isolated(
        """
        from policies.fast_bpe import PROBE, PROBE_DIGESTS, ids_digest, load_fast
        from proxy.serving.slim import release_rs_bpe_pages

        def rss_kb():
            status = open("/proc/self/status").read()
            return int(status.split("VmRSS:")[1].split()[0])

        enc = load_fast("o200k_base")
        before = rss_kb()
        released = release_rs_bpe_pages()
        after = rss_kb()
        exact = ids_digest(enc.encode_ordinary(PROBE)) == PROBE_DIGESTS["o200k_base"]
        print(released, before - after, exact, enc.count("x" * 10_000 + " end"))
        """
    )
    released, dropped, exact, count = out.split()
    assert int(released) > 16_000  # ~32 MB of o200k_base's compiled-in vocabulary
    assert int(dropped) > 16_000
    assert (exact, count) == ("True", "1251")


def test_tiktoken_keeps_encoding_without_its_python_vocabulary() -> None:
    out = run_isolated(
        """
        import tiktoken
        from proxy.serving.slim import slim_tiktoken

        try:
            enc = tiktoken.get_encoding("o200k_base")
        except Exception:
            print("unavailable")
            raise SystemExit(0)
        text = "slimmed, still exact"
        ids = enc.encode_ordinary(text)
        print(slim_tiktoken(), len(enc._mergeable_ranks), ids == enc.encode_ordinary(text))
        """
    )
    if out.strip() == "unavailable":
        pytest.skip("tiktoken's BPE files are unavailable: set TIKTOKEN_CACHE_DIR")
    assert out.split() == ["1", "0", "True"]
