"""The VectorIndex contract: every backend must pass every test here unchanged.

The backends come from the `index` fixture in conftest.py. Vectors come from the
HashingEmbedder, except where a test is about meaning (paraphrases), which needs
the real embedding model.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.ports import Embedder, VectorIndex, Vectors
from candor.types import Chunk, Metadata

# The Pinecone backend runs against a wire server on loopback, and the paraphrase
# test loads the MiniLM model: integration, not unit.
pytestmark = pytest.mark.integration

# (page, kind, text): short passages in the manner of the Git manual. Several
# share words with each other on purpose ("force", "push", "enabled",
# "conflict") so that only the exact identifier tells the right one apart.
PASSAGES: list[tuple[str, str, str]] = [
    (
        "git-push.html",
        "command",
        "git push --force-with-lease refuses to overwrite the remote branch unless it "
        "still points at the commit your remote-tracking branch expects, so work that "
        "others pushed in the meantime is not lost.",
    ),
    (
        "git-push.html",
        "command",
        "git push --force disables the check that the remote ref is an ancestor of the "
        "local ref. A forced push can discard commits that other people have pushed.",
    ),
    (
        "git-push.html",
        "command",
        "git push updates remote refs using local refs and sends the objects needed to "
        "complete the given refs to the remote repository.",
    ),
    (
        "git-rerere.html",
        "command",
        "When rerere.enabled is true, Git records how you resolved each conflicted hunk "
        "and replays the same resolution automatically when that conflict appears again.",
    ),
    (
        "git-config.html",
        "config",
        "rerere.autoUpdate: when set, git rerere updates the index with the resulting "
        "contents after it has cleanly resolved conflicts using a previous resolution.",
    ),
    (
        "git-config.html",
        "config",
        "core.fsmonitor: when enabled, Git asks a file system monitor which paths may "
        "have changed, which speeds up commands such as git status in large trees.",
    ),
    (
        "git-config.html",
        "config",
        "gc.auto: when there are more than this many loose objects, git gc --auto packs "
        "them. The default is 6700. Setting it to 0 disables automatic packing.",
    ),
    (
        "git-bisect.html",
        "command",
        "For git bisect run, the script exits with code 125 when the current source "
        "code cannot be tested; that revision is then skipped.",
    ),
    (
        "git-range-diff.html",
        "command",
        "git range-diff compares two versions of a patch series, given as A...B or as "
        "two commit ranges, and shows which commits were added, removed or changed.",
    ),
    (
        "git-stash.html",
        "command",
        "Use git stash to record the current state of the working directory and the "
        "index and go back to a clean working directory matching the HEAD commit.",
    ),
    (
        "git-reflog.html",
        "command",
        "Reference logs record when the tips of branches and other references were "
        "updated in the local repository; after a mistaken reset they let you find "
        "commits that no branch points to any more.",
    ),
    (
        "git-blame.html",
        "command",
        "git blame annotates each line in the given file with the revision that last "
        "modified the line and the name of its author.",
    ),
    (
        "git-worktree.html",
        "command",
        "git worktree manages multiple working trees attached to the same repository, "
        "so that more than one branch can be checked out at a time in separate folders.",
    ),
    (
        "git-clone.html",
        "command",
        "git clone --depth creates a shallow clone with a history truncated to the "
        "specified number of commits.",
    ),
    (
        "gitignore.html",
        "guide",
        "A gitignore file specifies intentionally untracked files that Git should "
        "ignore; a pattern that ends with a slash matches only directories.",
    ),
]


def doc_id(source: str) -> str:
    return hashlib.md5(source.encode()).hexdigest()


def corpus() -> list[Chunk]:
    chunks: list[Chunk] = []
    position: dict[str, int] = {}
    for source, kind, text in PASSAGES:
        n = position.get(source, 0)
        position[source] = n + 1
        chunks.append(
            Chunk(
                id=f"{doc_id(source)}-{n}",
                text=text,
                source=source,
                title=source.removesuffix(".html"),
                metadata={"kind": kind, "position": n},
            )
        )
    return chunks


def load(index: VectorIndex, embedder: Embedder, chunks: list[Chunk]) -> None:
    index.upsert(chunks, embedder.embed([c.text for c in chunks]))


def only(chunks: list[Chunk], fragment: str) -> Chunk:
    (match,) = [c for c in chunks if fragment in c.text]
    return match


@pytest.fixture
def hashing() -> HashingEmbedder:
    return HashingEmbedder(384)


@pytest.fixture(scope="module")
def meaningful_vectors(onnx_embedder: Embedder) -> Vectors:
    """The corpus embedded by the real model, once: it takes most of a second."""
    return onnx_embedder.embed([c.text for c in corpus()])


@pytest.fixture
def loaded(index: VectorIndex, hashing: HashingEmbedder) -> VectorIndex:
    load(index, hashing, corpus())
    return index


# -- writing ---------------------------------------------------------------------


def test_upsert_reports_how_many_chunks_it_wrote(
    index: VectorIndex, hashing: HashingEmbedder
) -> None:
    # Given the corpus
    chunks = corpus()

    # When it is upserted
    written = index.upsert(chunks, hashing.embed([c.text for c in chunks]))

    # Then every chunk was written and is counted
    assert written == len(chunks)
    assert index.count() == len(chunks)


def test_upsert_of_an_existing_id_overwrites_the_chunk(
    loaded: VectorIndex, hashing: HashingEmbedder
) -> None:
    # Given an indexed chunk
    old = only(corpus(), "git stash")
    new = Chunk(
        id=old.id, text="git stash list shows the stack of stashed entries", source=old.source
    )

    # When a chunk with the same id is upserted
    loaded.upsert([new], hashing.embed([new.text]))

    # Then the new text replaces the old one everywhere, and nothing is duplicated
    assert loaded.count() == len(corpus())
    assert loaded.fetch([old.id]) == [new]
    by_new = loaded.query(vector=None, keywords="stack", top_k=3).keyword
    by_old = loaded.query(vector=None, keywords="clean working directory", top_k=20).keyword
    assert [h.chunk.id for h in by_new] == [old.id]
    assert old.id not in [h.chunk.id for h in by_old]


def test_upsert_of_nothing_writes_nothing(index: VectorIndex) -> None:
    # When an empty batch is upserted
    written = index.upsert([], np.zeros((0, 384), dtype=np.float32))

    # Then nothing was written
    assert written == 0
    assert index.count() == 0


def test_upsert_of_vectors_of_the_wrong_width_raises(index: VectorIndex) -> None:
    # Given a chunk and a vector one value too wide
    chunk = corpus()[0]
    vectors = np.ones((1, 385), dtype=np.float32)

    # When / Then it is refused, and nothing is written
    with pytest.raises(ValueError, match="384"):
        index.upsert([chunk], vectors)
    assert index.count() == 0


def test_upsert_with_fewer_vectors_than_chunks_raises(index: VectorIndex) -> None:
    chunks = corpus()[:2]
    with pytest.raises(ValueError):
        index.upsert(chunks, np.ones((1, 384), dtype=np.float32))


def test_query_with_a_vector_of_the_wrong_width_raises(loaded: VectorIndex) -> None:
    with pytest.raises(ValueError, match="384"):
        loaded.query(vector=np.ones(383, dtype=np.float32), keywords=None, top_k=3)


def test_delete_removes_the_chunks_and_counts_only_those_that_existed(
    loaded: VectorIndex, hashing: HashingEmbedder
) -> None:
    # Given an indexed chunk
    gone = only(corpus(), "git blame")

    # When it is deleted along with an id that was never indexed
    deleted = loaded.delete([gone.id, "0" * 32 + "-0"])

    # Then one chunk was deleted, and neither ranking can find it any more
    assert deleted == 1
    assert loaded.count() == len(corpus()) - 1
    assert loaded.fetch([gone.id]) == []
    rankings = loaded.query(
        vector=hashing.embed([gone.text])[0], keywords="blame annotates", top_k=20
    )
    assert gone.id not in [h.chunk.id for h in rankings.dense + rankings.keyword]


def test_delete_of_nothing_deletes_nothing(loaded: VectorIndex) -> None:
    assert loaded.delete([]) == 0
    assert loaded.count() == len(corpus())


# -- listing and fetching --------------------------------------------------------


def test_list_ids_by_document_prefix_yields_exactly_that_documents_chunks(
    index: VectorIndex, hashing: HashingEmbedder
) -> None:
    # Given a document of eleven chunks, and a second document whose id is the
    # first one's plus one in the last hex digit, so that it sorts right after it
    first = "0123456789abcdef0123456789abcdee"
    second = first[:-1] + "f"
    ids = [f"{first}-{i}" for i in range(11)] + [f"{second}-{i}" for i in range(3)]
    chunks = [Chunk(id=cid, text=f"passage {cid}", source=cid[:32]) for cid in ids]
    load(index, hashing, chunks)

    # When the first document's ids are listed
    listed = list(index.list_ids(first))

    # Then all eleven come back, in order, and none of the second document's
    assert listed == sorted(f"{first}-{i}" for i in range(11))


def test_list_ids_without_a_prefix_yields_every_id_in_order(loaded: VectorIndex) -> None:
    assert list(loaded.list_ids()) == sorted(c.id for c in corpus())


def test_list_ids_with_an_unknown_prefix_yields_nothing(loaded: VectorIndex) -> None:
    assert list(loaded.list_ids("ffffffff")) == []


def test_fetch_returns_chunks_in_the_requested_order_and_skips_missing_ids(
    loaded: VectorIndex,
) -> None:
    # Given three indexed chunks and one unknown id
    a, b, c = corpus()[3], corpus()[0], corpus()[9]

    # When they are fetched in an arbitrary order
    fetched = loaded.fetch([c.id, a.id, "f" * 32 + "-9", b.id])

    # Then the chunks come back whole, in that order, without the unknown id
    assert fetched == [c, a, b]


def test_a_chunks_public_url_comes_back_from_fetch_and_both_rankings(
    index: VectorIndex, hashing: HashingEmbedder
) -> None:
    # Given a chunk of a document published at an address with quoted characters
    url = "https://docs.example.com/guides/Getting%20started%20%C3%A9t%C3%A9.html?v=2#push"
    chunk = Chunk(
        id=f"{doc_id('guides/push.md')}-0",
        text="git push --force-with-lease refuses to overwrite the remote branch.",
        source="guides/push.md",
        title="git-push",
        metadata={"url": url, "page": 3},
    )
    vector = hashing.embed([chunk.text])
    index.upsert([chunk], vector)

    # When it is fetched and found by each ranking
    (fetched,) = index.fetch([chunk.id])
    rankings = index.query(vector=vector[0], keywords="force-with-lease", top_k=1)

    # Then every way gives the address back as it was stored
    found = [fetched, rankings.dense[0].chunk, rankings.keyword[0].chunk]
    assert [c.url for c in found] == [url] * 3
    assert [c.page for c in found] == [3] * 3


# -- keyword ranking -------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ("--force-with-lease", "--force-with-lease"),
        ("What does git push --force-with-lease do?", "--force-with-lease"),
        ("rerere.enabled", "rerere.enabled"),
        ("Which setting is rerere.enabled?", "rerere.enabled"),
        ("gc.auto", "gc.auto"),
        ("exit code 125", "125"),
    ],
)
def test_keyword_ranking_puts_the_chunk_naming_an_exact_identifier_first(
    loaded: VectorIndex, query: str, fragment: str
) -> None:
    # When the index is searched by keywords for an identifier with punctuation
    hits = loaded.query(vector=None, keywords=query, top_k=5).keyword

    # Then the chunk that names it ranks first, ahead of chunks sharing its parts
    assert hits[0].chunk == only(corpus(), fragment)


def test_keyword_scores_are_higher_for_better_matches(loaded: VectorIndex) -> None:
    hits = loaded.query(vector=None, keywords="push force remote", top_k=5).keyword
    scores = [h.score for h in hits]
    assert len(hits) >= 2
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize(
    "query",
    [
        "--force-with-lease",
        "A...B",
        'say "hello',
        "(unbalanced",
        "NEAR(push force)",
        "push AND OR NOT",
        "*",
        "title:push",
        "^start",
        "rerere.enabled)",
        "'single quotes'",
        "{braces} [brackets] <angles>",
        "-",
        '""',
        "naïve café — ünïcödé",
        "日本語のクエリ",
    ],
)
def test_punctuation_heavy_keyword_queries_do_not_raise(loaded: VectorIndex, query: str) -> None:
    hits = loaded.query(vector=None, keywords=query, top_k=5).keyword
    assert isinstance(hits, list)


@pytest.mark.parametrize("keywords", [None, "", "   ", "?!"])
def test_keyword_ranking_is_empty_without_searchable_keywords(
    loaded: VectorIndex, keywords: str | None
) -> None:
    assert loaded.query(vector=None, keywords=keywords, top_k=5).keyword == []


# -- dense ranking ---------------------------------------------------------------


def test_dense_ranking_is_empty_without_a_vector(loaded: VectorIndex) -> None:
    assert loaded.query(vector=None, keywords="push", top_k=5).dense == []


def test_dense_ranking_returns_at_most_top_k_hits_best_first(
    loaded: VectorIndex, hashing: HashingEmbedder
) -> None:
    hits = loaded.query(vector=hashing.embed(["git push"])[0], keywords=None, top_k=4).dense
    assert len(hits) == 4
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_dense_ranking_finds_a_chunk_by_its_own_vector(
    loaded: VectorIndex, hashing: HashingEmbedder
) -> None:
    target = only(corpus(), "git worktree")
    hits = loaded.query(vector=hashing.embed([target.text])[0], keywords=None, top_k=1).dense
    assert [h.chunk for h in hits] == [target]
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)


@pytest.mark.parametrize(
    ("question", "fragment"),
    [
        ("How do I get back commits I lost after resetting by mistake?", "Reference logs"),
        ("Put my unfinished edits aside for a while and return to a clean tree", "git stash"),
        ("Who wrote this line of code and when was it last changed?", "git blame"),
        ("Have two branches checked out simultaneously in different directories", "worktree"),
        ("Download a repository without its full history", "shallow clone"),
    ],
)
def test_dense_ranking_finds_paraphrases_that_share_few_words(
    index: VectorIndex,
    onnx_embedder: Embedder,
    meaningful_vectors: Vectors,
    question: str,
    fragment: str,
) -> None:
    # Given the corpus embedded by the real model
    index.upsert(corpus(), meaningful_vectors)

    # When the index is searched with the vector of a paraphrased question
    hits = index.query(vector=onnx_embedder.embed([question])[0], keywords=None, top_k=3).dense

    # Then the passage it paraphrases ranks first
    assert hits[0].chunk == only(corpus(), fragment)


# -- filtering -------------------------------------------------------------------


def test_where_on_source_keeps_only_that_documents_chunks_in_both_rankings(
    loaded: VectorIndex, hashing: HashingEmbedder
) -> None:
    # When both rankings are asked for "push", restricted to git-config.html
    rankings = loaded.query(
        vector=hashing.embed(["git push force"])[0],
        keywords="push force enabled",
        top_k=20,
        where={"source": "git-config.html"},
    )

    # Then only that page's chunks are ranked, however well others match
    assert rankings.dense
    assert rankings.keyword
    assert {h.chunk.source for h in rankings.dense + rankings.keyword} == {"git-config.html"}


def test_where_on_metadata_keeps_only_matching_chunks(
    loaded: VectorIndex, hashing: HashingEmbedder
) -> None:
    rankings = loaded.query(
        vector=hashing.embed(["when enabled"])[0],
        keywords="when enabled",
        top_k=20,
        where={"kind": "config"},
    )
    configs = {c.id for c in corpus() if c.metadata["kind"] == "config"}
    assert {h.chunk.id for h in rankings.dense} == configs
    assert rankings.keyword
    assert {h.chunk.id for h in rankings.keyword} <= configs


def test_where_with_several_keys_requires_all_of_them(
    loaded: VectorIndex, hashing: HashingEmbedder
) -> None:
    where: Metadata = {"source": "git-push.html", "position": 1}
    rankings = loaded.query(
        vector=hashing.embed(["push"])[0], keywords="push", top_k=20, where=where
    )
    expected = [only(corpus(), "git push --force disables")]
    assert [h.chunk for h in rankings.dense] == expected
    assert [h.chunk for h in rankings.keyword] == expected


def test_where_that_matches_nothing_gives_empty_rankings(
    loaded: VectorIndex, hashing: HashingEmbedder
) -> None:
    rankings = loaded.query(
        vector=hashing.embed(["push"])[0], keywords="push", top_k=5, where={"kind": "recipe"}
    )
    assert rankings.dense == []
    assert rankings.keyword == []
