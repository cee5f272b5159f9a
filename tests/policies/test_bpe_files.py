"""tiktoken's BPE files rebuilt from rs_bpe: the official bytes, found by tiktoken offline."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from policies import bpe_files

pytest.importorskip("rs_bpe")

# Any download attempt fails at once: requests honours the proxy variables.
OFFLINE = {"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}


def python(code: str, cache: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **OFFLINE, "TIKTOKEN_CACHE_DIR": str(cache), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("name", sorted(bpe_files.FILES))
def test_rebuilt_file_is_the_official_one(name: str) -> None:
    data = bpe_files.rebuild(name)
    assert data is not None
    assert hashlib.sha256(data).hexdigest() == bpe_files.FILES[name].sha256


def test_an_offline_tiktoken_loads_the_rebuilt_files(tmp_path: Path) -> None:
    load = "import tiktoken; print(tiktoken.get_encoding('{}').encode('hello world'))"
    before = python(load.format("o200k_base"), tmp_path)
    assert before.returncode != 0, "the download must fail here, or this test proves nothing"
    for name in bpe_files.FILES:
        assert bpe_files.ensure(name, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f.cache_name for f in bpe_files.FILES.values()
    )
    for name, ids in (("o200k_base", "[24912, 2375]"), ("cl100k_base", "[15339, 1917]")):
        after = python(load.format(name), tmp_path)
        assert after.returncode == 0, after.stderr
        assert after.stdout.strip() == ids


def test_ensure_leaves_an_existing_file_and_reports_unknown_names(tmp_path: Path) -> None:
    spec = bpe_files.FILES["cl100k_base"]
    (tmp_path / spec.cache_name).write_bytes(b"kept")
    assert bpe_files.ensure("cl100k_base", tmp_path)
    assert (tmp_path / spec.cache_name).read_bytes() == b"kept"
    assert not bpe_files.ensure("p50k_base", tmp_path)


def test_an_unwritable_cache_is_not_an_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert not bpe_files.ensure("o200k_base", blocker / "cache")


def test_forced_tiktoken_counts_exactly_offline(tmp_path: Path) -> None:
    """CURATOR_TOKENIZER=tiktoken with no BPE files and no network: exact, not estimated."""
    code = (
        "from policies.tokens import TokenCounter; c = TokenCounter(); "
        "print(type(c.encoder('gpt-4o')).__name__, c.fallbacks)"
    )
    done = python(code, tmp_path, CURATOR_TOKENIZER="tiktoken")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Encoding set()"
