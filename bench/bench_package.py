"""What `make build` packages for Lambda: each artifact's size unzipped and zipped.

Usage: make build && python -m bench.bench_package

Reads infra/.aws-sam/build (sam build's output), and for the layer and each function
prints the bytes on disk and the size of the zip that `sam deploy` uploads (deflate,
level 6, as SAM zips). Lambda's limits: 250 MB unzipped for a function with all its
layers, 50 MB zipped for a direct upload (larger packages go through S3, as
`sam deploy` does).
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "infra/.aws-sam/build"
KB = 1_000


def sizes(folder: Path) -> tuple[int, int]:
    """(bytes of the files, bytes of their zip)."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for path in files:
            archive.write(path, path.relative_to(folder))
    return sum(p.stat().st_size for p in files), buffer.tell()


def main() -> None:
    if not BUILD.is_dir():
        raise SystemExit(f"{BUILD} does not exist: run `make build` first")
    for artifact in sorted(p for p in BUILD.iterdir() if p.is_dir()):
        unzipped, zipped = sizes(artifact)
        print(f"{artifact.name:18} unzipped={unzipped / KB:9,.0f} kB zipped={zipped / KB:9,.0f} kB")


if __name__ == "__main__":
    main()
