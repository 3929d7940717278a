"""The levers on the fixture pages with the hashing embedder: each row is paired with
`default`, and the rows of two sets pool into one verdict per lever."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from candor.evaluation.levers import main
from tests.conftest import clear_candor_env

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(autouse=True)
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clear_candor_env(monkeypatch)
    monkeypatch.setenv("CANDOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CANDOR_EMBEDDER_BACKEND", "hashing")


def test_a_lever_is_measured_against_default_and_pooled_over_two_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [
        "--corpus",
        str(FIXTURES / "docs"),
        "--questions",
        str(FIXTURES / "kite-questions.jsonl"),
    ]
    # Only "cap off" is asked for: default is measured first all the same.
    for name in ("dev", "validation"):
        assert (
            main(
                [
                    *args,
                    "--levers",
                    "cap off",
                    "--no-plain",
                    "--out",
                    str(tmp_path / f"{name}.json"),
                ]
            )
            == 0
        )
    rows = json.loads((tmp_path / "dev.json").read_text())
    assert [(r["lever"], r["strategy"]) for r in rows][:4] == [
        ("default", "dense"),
        ("default", "keyword"),
        ("default", "hybrid"),
        ("cap off", "dense"),
    ]
    assert "paired" not in rows[0]
    hybrid = next(r for r in rows if (r["lever"], r["strategy"]) == ("cap off", "hybrid"))
    assert hybrid["paired"]["Recall@5"]["n"] == hybrid["n"] == 2
    capsys.readouterr()

    files = [str(tmp_path / "dev.json"), str(tmp_path / "validation.json")]
    assert main(["--pool", *files, "--md", str(tmp_path / "pooled.md")]) == 0
    text = (tmp_path / "pooled.md").read_text()
    assert "### cap off (hybrid) against default" in text
    assert "| figure | better | dev: default → lever |" in text
    assert text.rstrip("\n") in capsys.readouterr().out
