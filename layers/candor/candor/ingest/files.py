"""The documents of local paths, as (source, bytes): what `candor ingest` reads.

(The S3 function reads its documents from the event's bucket: candor.ingest.s3.)
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from candor.errors import IngestError
from candor.ingest.loaders import is_supported


def iter_paths(paths: Sequence[Path]) -> Iterator[tuple[str, bytes]]:
    """(source, bytes) for each path: a file by its name; a directory's supported files
    (recursively, hidden ones skipped) by their path below it, with "/", sorted.

    Every path is checked before anything is read, so a typo fails at once rather
    than after the other paths were ingested.
    """
    missing = [str(path) for path in paths if not path.exists()]
    if missing:
        raise IngestError(f"no such file or directory: {', '.join(missing)}")
    return _read(paths)


def _read(paths: Sequence[Path]) -> Iterator[tuple[str, bytes]]:
    for path in paths:
        if path.is_dir():
            for relative in _supported_files(path):
                yield relative, (path / relative).read_bytes()
        else:
            # Named on purpose, so not filtered: an unsupported type is reported.
            yield path.name, path.read_bytes()


def _supported_files(root: Path) -> list[str]:
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [name for name in dirs if not name.startswith(".")]
        below = Path(folder).relative_to(root)
        found.extend(
            (below / name).as_posix()
            for name in files
            if not name.startswith(".") and is_supported(name)
        )
    return sorted(found)
