"""The evaluation sets in data/eval are copies of the workplace's shared recipes.

They are kept in the repository so that a clone anywhere can fetch its corpora and
run its tests (`make test` once stopped at the corpus step in a clone that had no
../shared beside it). A copy can fall behind its source: where the shared folder
stands beside the clone, each file must match it byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
COPY = ROOT / "data" / "eval"
SHARED = ROOT.parent / "shared" / "eval"
FILES = (
    "README.md",
    "fetch-git-doc.sh",
    "fetch-sqlite-doc.sh",
    "git-doc-questions.jsonl",
    "sqlite-doc-questions.jsonl",
    "verify_questions.py",
)


@pytest.mark.parametrize("name", FILES)
def test_each_evaluation_file_is_in_the_repository(name: str) -> None:
    assert (COPY / name).is_file()


@pytest.mark.parametrize("name", FILES)
def test_the_copy_matches_the_shared_recipes_where_they_stand_beside_the_clone(name: str) -> None:
    if not SHARED.is_dir():
        pytest.skip("no ../shared/eval beside this clone: the copy is all there is")
    assert (COPY / name).read_bytes() == (SHARED / name).read_bytes(), (
        f"data/eval/{name} differs from ../shared/eval/{name}: copy the new one in"
    )


def test_no_shared_file_is_left_out_of_the_copy() -> None:
    if not SHARED.is_dir():
        pytest.skip("no ../shared/eval beside this clone")
    assert sorted(path.name for path in SHARED.iterdir() if path.is_file()) == sorted(FILES)
