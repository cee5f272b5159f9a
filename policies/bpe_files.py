"""tiktoken's BPE files for o200k_base and cl100k_base, written from rs_bpe's compiled-in tables.

tiktoken downloads these files on first use, which fails offline. rs_bpe carries the same
vocabularies, so the files can be rebuilt byte for byte: one `base64(token) rank` line per
token id, in rank order. tiktoken checks each cached file's SHA-256 against the official
value, and so does `ensure` before writing one, so a rebuilt file is the official file or
is not written at all.

    python -m policies.bpe_files [DIR]   # DIR: default TIKTOKEN_CACHE_DIR, else tiktoken's
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class BpeFile:
    url: str
    sha256: str
    size: int
    """Token ids 0..size-1 are the file's ranks (special tokens come after)."""

    @property
    def cache_name(self) -> str:
        """tiktoken's cache file name: the SHA-1 of the download URL."""
        return hashlib.sha1(self.url.encode()).hexdigest()


_BASE = "https://openaipublic.blob.core.windows.net/encodings/"
FILES = {
    "o200k_base": BpeFile(
        _BASE + "o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        199_998,
    ),
    "cl100k_base": BpeFile(
        _BASE + "cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        100_256,
    ),
}


def cache_dir() -> Path:
    """Where tiktoken looks for cached files (its own rule, `tiktoken.load`)."""
    for name in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if os.environ.get(name):
            return Path(os.environ[name])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def rebuild(name: str) -> bytes | None:
    """The official BPE file of `name`, from rs_bpe; None without rs_bpe or on a mismatch."""
    spec = FILES.get(name)
    if spec is None:
        return None
    try:
        module = importlib.import_module("rs_bpe.bpe")
    except ImportError:
        return None
    bpe = getattr(module.openai, name)().bpe()
    lines = (
        b"%s %d\n" % (base64.b64encode(bytes(bpe.decode_tokens([rank]))), rank)
        for rank in range(spec.size)
    )
    data = b"".join(lines)
    return data if hashlib.sha256(data).hexdigest() == spec.sha256 else None


def ensure(name: str, folder: Path | None = None) -> bool:
    """Make sure tiktoken finds `name` in `folder` (default `cache_dir()`) without a download.

    True when the file is there afterwards; an existing file is left alone (tiktoken checks
    it itself)."""
    spec = FILES.get(name)
    if spec is None:
        return False
    folder = folder or cache_dir()
    target = folder / spec.cache_name
    if target.is_file():
        return True
    data = rebuild(name)
    if data is None:
        return False
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed, so a concurrent reader never sees half a file.
        fd, partial = tempfile.mkstemp(dir=folder, prefix=f".{spec.cache_name}.")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(partial, 0o644)  # a cache built as root is read by the service's user
        os.replace(partial, target)
    except OSError:  # a read-only cache: tiktoken then tries its download
        return False
    return True


def main(argv: list[str]) -> int:
    folder = Path(argv[0]) if argv else cache_dir()
    missing = [name for name in FILES if not ensure(name, folder)]
    if missing:
        print(f"bpe_files: cannot rebuild {', '.join(missing)} (is rs_bpe installed?)")
        return 1
    print(f"bpe_files: {', '.join(FILES)} in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
