"""`candor ingest --json` and `candor stats --json` on the embedded default (hashing embedder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from candor.cli import main
from tests.conftest import clear_candor_env
from tests.support.pdfs import make_pdf

pytestmark = pytest.mark.integration


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    clear_candor_env(monkeypatch)
    monkeypatch.setenv("CANDOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CANDOR_EMBEDDER_BACKEND", "hashing")
    folder = tmp_path / "site"
    (folder / "guides").mkdir(parents=True)
    (folder / "guides" / "install.md").write_text("# Install\n\nUnpack the kite.\n")
    (folder / "notes.txt").write_text("Notes about the winch.\n")
    (folder / "manual.pdf").write_bytes(make_pdf([["The winch coils loose lines."]]))
    (folder / "scan.pdf").write_bytes(make_pdf([[]]))
    return folder


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_ingest_json_reports_every_count_and_a_re_ingest_embeds_nothing(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, first = run(capsys, "ingest", str(site), "--json")
    again_code, again = run(capsys, "ingest", str(site), "--json")

    assert (code, again_code) == (0, 0)
    assert first["documents"] == first["documents_changed"] == 3
    assert first["documents_seen"] == 4
    assert first["failed"] == 1 and "no extractable text" in first["failures"][0]["reason"]
    assert first["chunks"] == first["chunks_embedded"] == first["chunks_upserted"] == 3
    assert first["corpus_version"] == 1
    assert again["documents"] == again["documents_unchanged"] == 3
    assert (again["chunks_embedded"], again["chunks_upserted"], again["deleted"]) == (0, 0, 0)
    assert again["chunks"] == first["chunks"]
    assert again["corpus_version"] is None  # nothing changed, so cached answers stand


def test_stats_json_prints_documents_chunks_and_the_corpus_version(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, "ingest", str(site), "--json")
    (site / "notes.txt").write_text("Notes about the winch, revised.\n")
    run(capsys, "ingest", str(site), "--json")

    code, stats = run(capsys, "stats", "--json")

    assert code == 0
    assert stats == {
        "index": "default",
        "backend": "sqlite",
        "documents": 3,
        "chunks": 3,
        "corpus_version": 2,
        "sites": [],  # no site synced (`candor sync`)
    }
