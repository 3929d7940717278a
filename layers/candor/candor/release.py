"""Which code is running: a digest of the candor package as installed.

The answer cache keys on it (candor.guards.settings_fingerprint), so an upgrade
ends every cached answer and decline, even one that keeps the version number:
new prompts, checks or a new screening model answer differently.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


def tree_digest(root: Path) -> str:
    """A sha256 over every file under `root` (its path and bytes), bytecode aside."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\x00")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@cache
def code_digest() -> str:
    """The installed package's digest, computed once per process (about 1.4 MB read)."""
    return tree_digest(PACKAGE)
