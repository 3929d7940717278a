"""A document's public address, from where it is published to the citation that links
to it: the S3 object's `x-amz-meta-url` (S3 through moto) or CANDOR_SOURCE_BASE_URL and
the document's path (`candor ingest`), stored with the chunks in the SQLite index and in
Pinecone (its loopback wire server), and given back in POST /ask, the /ask/stream `done`
event and the stored trace. Only http(s) addresses are kept: the value is untrusted."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import boto3
import pytest
from moto import mock_aws

from candor.api.app import create_app
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.cli import main
from candor.deps import Deps
from candor.guards import CachedAnswer
from candor.ingest import doc_prefix
from candor.ingest.reading import Chunking
from candor.ingest.records import CompletionRecords
from candor.ingest.s3 import ObjectChange, S3Ingestion, S3Reader
from candor.ports import VectorIndex
from candor.settings import Settings
from candor.traces import Trace
from candor.types import Chunk
from tests.conftest import clear_candor_env
from tests.support import sse
from tests.support.edge import allowing, browser
from tests.support.embedders import CountingEmbedder
from tests.support.fakes import ScriptedChatModel
from tests.support.indexes import BACKENDS, DIMENSIONS, vector_index

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

pytestmark = pytest.mark.integration

REGION: Final = "eu-west-1"
BUCKET = "candor-docs-urls"
KEY = "guides/push.md"
PUSH = (
    b"# git push\n\n## --force-with-lease\n\n"
    b"--force-with-lease refuses the push unless the remote ref still points at the "
    b"commit your remote-tracking branch records.\n"
)
PUBLIC = "https://docs.example.com/guides/push.html"
QUESTION = "What does --force-with-lease do?"


@pytest.fixture
def s3(fake_aws_credentials: str) -> Iterator[S3Client]:
    with mock_aws():
        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(
            Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION}
        )
        yield client


@pytest.fixture(params=BACKENDS)
def any_index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorIndex]:
    with vector_index(request.param, tmp_path) as index:
        yield index


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStateStore]:
    state = SqliteStateStore(tmp_path / "state.sqlite3")
    yield state
    state.close()


def ingestion(
    s3: S3Client, index: VectorIndex, state: SqliteStateStore, embedder: CountingEmbedder
) -> S3Ingestion:
    return S3Ingestion(
        embedder=embedder,
        index=index,
        reader=S3Reader(s3, max_bytes=50_000),
        chunking=Chunking(max_bytes=50_000),
        records=CompletionRecords(state, "site"),
    )


def put(s3: S3Client, url: str | None, key: str = KEY) -> ObjectChange:
    metadata = {"Metadata": {"url": url}} if url is not None else {}
    s3.put_object(Bucket=BUCKET, Key=key, Body=PUSH, ContentType="text/markdown", **metadata)  # type: ignore[arg-type]
    return ObjectChange(BUCKET, key, "ObjectCreated:Put")


def chunks_of(index: VectorIndex, key: str = KEY) -> list[Chunk]:
    return index.fetch(list(index.list_ids(doc_prefix(key))))


def answering_deps(settings: Settings, index: VectorIndex, state: SqliteStateStore) -> Deps:
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}] * 2,
            "judge": [True] * 2,
            "text": ["It refuses to overwrite work you have not seen [1]."] * 2,
        }
    )
    # No cache: the streamed question is answered by a run of its own, not by a repeat.
    deps = Deps(settings, chat, HashingEmbedder(DIMENSIONS), index, None, state)
    return allowing(deps, cache_enabled=False)


# -- S3: x-amz-meta-url ---------------------------------------------------------------


def test_an_objects_url_metadata_reaches_the_citation_in_ask_the_stream_and_the_trace(
    s3: S3Client, any_index: VectorIndex, store: SqliteStateStore, settings: Settings
) -> None:
    # Given an object uploaded with x-amz-meta-url, and its put event ingested
    result = ingestion(s3, any_index, store, CountingEmbedder()).apply([put(s3, PUBLIC)])
    assert [o.status for o in result.outcomes] == ["changed"]
    http = browser(create_app(lambda: answering_deps(settings, any_index, store)))

    # When a visitor asks, as JSON and streamed
    answer = http.post("/ask", json={"question": QUESTION}).json()
    streamed = sse.parse_text(http.post("/ask/stream", json={"question": QUESTION}).text)

    # Then the citation links to the object's public address everywhere
    (cited,) = answer["citations"]
    assert (cited["source"], cited["url"]) == (KEY, PUBLIC)
    (done,) = [event.data for event in streamed if event.name == "done"]
    assert [c["url"] for c in done["citations"]] == [PUBLIC]
    trace = store.get_trace(answer["trace_id"], now=time.time())
    assert trace is not None
    assert [c.url for c in Trace.from_stored(trace).citations] == [PUBLIC]


def test_a_cached_repeat_keeps_the_citations_url(
    s3: S3Client, any_index: VectorIndex, store: SqliteStateStore, settings: Settings
) -> None:
    ingestion(s3, any_index, store, CountingEmbedder()).apply([put(s3, PUBLIC)])
    deps = allowing(answering_deps(settings, any_index, store), cache_enabled=True)
    http = browser(create_app(lambda: deps))

    first = http.post("/ask", json={"question": QUESTION}).json()
    repeat = http.post("/ask", json={"question": QUESTION}).json()

    assert (first["cached"], repeat["cached"]) == (False, True)
    assert [c["url"] for c in repeat["citations"]] == [PUBLIC]


def test_an_answer_cached_before_citations_had_urls_still_loads() -> None:
    stored = json.dumps(
        {
            "answer": "It refuses the push [1].",
            "decision": "answered",
            "citations": [
                {"id": "a1-0", "source": KEY, "title": "git push", "snippet": "…", "page": None}
            ],
        }
    )

    (citation,) = CachedAnswer.from_json(stored).citations

    assert (citation.source, citation.url) == (KEY, None)


def test_a_document_without_a_url_is_cited_without_one(
    s3: S3Client, any_index: VectorIndex, store: SqliteStateStore, settings: Settings
) -> None:
    ingestion(s3, any_index, store, CountingEmbedder()).apply([put(s3, None)])
    http = browser(create_app(lambda: answering_deps(settings, any_index, store)))

    (cited,) = http.post("/ask", json={"question": QUESTION}).json()["citations"]

    assert cited["source"] == KEY
    assert cited["url"] is None


@pytest.mark.parametrize(
    "hostile",
    [
        "javascript:alert(document.cookie)",
        "data:text/html,<script>alert(1)</script>",
        "JavaScript:alert(1)",
        "/guides/push.html",
        "https://docs.example.com/a b",
        "ftp://docs.example.com/push.md",
    ],
)
def test_a_url_that_is_not_http_or_https_is_dropped_with_a_log_line(
    s3: S3Client,
    any_index: VectorIndex,
    store: SqliteStateStore,
    hostile: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given an object whose uploader set a url that is no public http(s) address
    caplog.set_level(logging.WARNING, logger="candor.urls")

    # When it is ingested
    result = ingestion(s3, any_index, store, CountingEmbedder()).apply([put(s3, hostile)])

    # Then the document is indexed without an address, and the log says why
    assert [o.status for o in result.outcomes] == ["changed"]
    chunks = chunks_of(any_index)
    assert chunks and all(chunk.url is None for chunk in chunks)
    assert any(KEY in r.getMessage() and "dropped" in r.getMessage() for r in caplog.records)


def test_the_url_survives_a_repeated_event_at_no_cost(
    s3: S3Client, any_index: VectorIndex, store: SqliteStateStore
) -> None:
    embedder = CountingEmbedder()
    work = ingestion(s3, any_index, store, embedder)
    work.apply([put(s3, PUBLIC)])
    embedded = embedder.texts

    again = work.apply([ObjectChange(BUCKET, KEY, "ObjectCreated:Put")])

    assert [o.status for o in again.outcomes] == ["unchanged"]
    assert embedder.texts == embedded
    assert [chunk.url for chunk in chunks_of(any_index)] == [PUBLIC]


def test_changing_only_the_url_metadata_relinks_every_chunk_and_bumps_the_corpus(
    s3: S3Client, any_index: VectorIndex, store: SqliteStateStore
) -> None:
    # Given an ingested object, whose metadata is then replaced by a copy onto itself
    embedder = CountingEmbedder()
    work = ingestion(s3, any_index, store, embedder)
    work.apply([put(s3, PUBLIC)])
    embedded = embedder.texts
    moved = "https://docs.example.com/v2/push.html"
    s3.copy_object(
        Bucket=BUCKET,
        Key=KEY,
        CopySource={"Bucket": BUCKET, "Key": KEY},
        Metadata={"url": moved},
        MetadataDirective="REPLACE",
        ContentType="text/markdown",
    )

    # When its copy event is ingested
    result = work.apply([ObjectChange(BUCKET, KEY, "ObjectCreated:Copy")])

    # Then every chunk carries the new address and cached answers are retired. The
    # SQLite index updates the metadata in place; Pinecone's update takes one id per
    # request, so there the document is embedded and upserted again.
    assert [o.status for o in result.outcomes] == ["changed"]
    assert result.report.corpus_version == 2
    assert [chunk.url for chunk in chunks_of(any_index)] == [moved]
    in_place = isinstance(any_index, SqliteVectorIndex)
    assert embedder.texts == (embedded if in_place else 2 * embedded)


def test_removing_the_url_metadata_removes_the_address(
    s3: S3Client, any_index: VectorIndex, store: SqliteStateStore
) -> None:
    work = ingestion(s3, any_index, store, CountingEmbedder())
    work.apply([put(s3, PUBLIC)])

    work.apply([put(s3, None)])

    assert [chunk.url for chunk in chunks_of(any_index)] == [None]


# -- locally: CANDOR_SOURCE_BASE_URL ----------------------------------------------------


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    clear_candor_env(monkeypatch)
    monkeypatch.setenv("CANDOR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CANDOR_EMBEDDER_BACKEND", "hashing")
    folder = tmp_path / "site"
    (folder / "guides").mkdir(parents=True)
    (folder / "guides" / "push.md").write_bytes(PUSH)
    (folder / "notes").mkdir()
    (folder / "notes" / "Getting started – été & co.md").write_text("# Notes\n\nThe winch.\n")
    return folder


def local_urls(data_dir: Path) -> dict[str, str | None]:
    with SqliteVectorIndex(data_dir / "indexes" / "default.sqlite3", 384) as index:
        return {chunk.source: chunk.url for chunk in index.fetch(list(index.list_ids()))}


def run_ingest(capsys: pytest.CaptureFixture[str], folder: Path) -> Any:
    capsys.readouterr()
    assert main(["ingest", str(folder), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_candor_ingest_links_each_document_to_the_base_url_and_its_quoted_path(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CANDOR_SOURCE_BASE_URL", "https://docs.example.com/handbook/")

    run_ingest(capsys, site)

    assert local_urls(tmp_path / "data") == {
        "guides/push.md": "https://docs.example.com/handbook/guides/push.md",
        "notes/Getting started – été & co.md": (
            "https://docs.example.com/handbook/notes/Getting%20started%20%E2%80%93%20"
            "%C3%A9t%C3%A9%20%26%20co.md"
        ),
    }


def test_a_new_base_url_relinks_the_local_index_without_embedding(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a folder ingested without a base URL
    first = run_ingest(capsys, site)
    assert set(local_urls(tmp_path / "data").values()) == {None}

    # When it is ingested again with one
    monkeypatch.setenv("CANDOR_SOURCE_BASE_URL", "http://127.0.0.1:8000/docs")
    again = run_ingest(capsys, site)

    # Then every chunk has its address, nothing was embedded, and the corpus moved on
    assert again["documents_changed"] == 2
    assert again["chunks_embedded"] == 0
    assert again["corpus_version"] == first["corpus_version"] + 1
    assert local_urls(tmp_path / "data")["guides/push.md"] == (
        "http://127.0.0.1:8000/docs/guides/push.md"
    )


@pytest.mark.parametrize("base", ["javascript:alert(1)//", "docs.example.com", "file:///srv/docs"])
def test_a_base_url_that_is_not_http_or_https_is_refused_at_start(
    site: Path, monkeypatch: pytest.MonkeyPatch, base: str
) -> None:
    monkeypatch.setenv("CANDOR_SOURCE_BASE_URL", base)

    with pytest.raises(SystemExit) as refused:
        main(["ingest", str(site), "--json"])

    assert "source_base_url" in str(refused.value)
    assert "http(s)" in str(refused.value)
