"""Index reads per request: bounded whatever the question, shared between grade visits,
each one in the trace.

One question of hundreds of names made one keyword query per name (145 for 200
absent flags, 402 for 200 made-up product names): each a billed Pinecone read,
outside the budget, and enough from two addresses to pass Pinecone's queries per
second for the namespace. The index here is the embedded SQLite one, wrapped to
count what reaches it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import string
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from candor import service
from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.billing import Meter
from candor.deps import Deps
from candor.graph import limits
from candor.graph.runner import MeteredIndex
from candor.ports import Vectors
from candor.results import AskResult
from candor.types import Chunk, Message, Metadata, Rankings
from tests.conftest import MakeDeps
from tests.support.fakes import EndlessChat, ScriptedChatModel

pytestmark = pytest.mark.unit


class CountingIndex:
    """A VectorIndex that passes every call to the real one and counts the reads."""

    def __init__(self, inner: SqliteVectorIndex) -> None:
        self.inner = inner
        self.keywords: list[str | None] = []  # one entry per query
        self.lookups: list[str] = []  # the keywords of each query without a vector
        self.fetches = 0

    @property
    def reads(self) -> int:
        return len(self.keywords) + self.fetches

    def query(
        self,
        *,
        vector: Vectors | None,
        keywords: str | None,
        top_k: int,
        where: Metadata | None = None,
    ) -> Rankings:
        self.keywords.append(keywords)
        if vector is None and keywords is not None:
            self.lookups.append(keywords)
        return self.inner.query(vector=vector, keywords=keywords, top_k=top_k, where=where)

    def fetch(self, ids: Sequence[str]) -> list[Chunk]:
        self.fetches += 1
        return self.inner.fetch(ids)

    def upsert(self, chunks: Sequence[Chunk], vectors: Vectors) -> int:
        return self.inner.upsert(chunks, vectors)

    def delete(self, ids: Sequence[str]) -> int:
        return self.inner.delete(ids)

    def list_ids(self, prefix: str = "") -> Iterator[str]:
        return self.inner.list_ids(prefix)

    def count(self) -> int:
        return self.inner.count()


def counted(deps: Deps) -> tuple[Deps, CountingIndex]:
    assert isinstance(deps.index, SqliteVectorIndex)
    counting = CountingIndex(deps.index)
    return dataclasses.replace(deps, index=counting), counting


def ask(deps: Deps, question: str) -> AskResult:
    return asyncio.run(service.ask(deps, question))


def bound(deps: Deps) -> int:
    return limits.envelope(deps.settings).index_reads


def two_hundred_flags() -> str:
    rnd = random.Random(1)
    flags: list[str] = []
    while len(flags) < 200:
        flag = "--" + "".join(rnd.choice(string.ascii_lowercase) for _ in range(2))
        if flag not in flags:
            flags.append(flag)
    return " ".join(flags)


def two_hundred_products() -> str:
    rnd = random.Random(2)
    names: list[str] = []
    while len(names) < 200:
        name = rnd.choice(string.ascii_lowercase) + rnd.choice(string.ascii_uppercase)
        name += rnd.choice(string.ascii_lowercase)
        if name not in names:
            names.append(name)
    return ", ".join(names)


ANSWERING: dict[str, list[Any]] = {
    "Triage": [{"abusive": False, "kind": "question"}] * 2,
    "judge": [True] * 2,
    "Rewrite": [{"query": "force with lease"}],
    "text": ["It refuses to overwrite work you have not seen [1]."] * 2,
}


@pytest.mark.parametrize(
    "question",
    [two_hundred_flags(), two_hundred_products()],
    ids=["200 absent flags", "200 made-up product names"],
)
def test_a_question_of_hundreds_of_names_makes_no_more_index_reads_than_the_bound(
    make_deps: MakeDeps, question: str
) -> None:
    assert len(question) <= 1_000  # what POST /ask takes
    deps, index = counted(make_deps(ScriptedChatModel(dict(ANSWERING))))

    result = ask(deps, question)

    assert index.reads <= bound(deps)
    assert index.reads <= 3  # the retrieval, the names' query, whether keywords search
    assert result.decision == "declined"
    assert sum(step.index_reads for step in result.trace) == index.reads


def test_every_index_read_of_a_request_is_in_its_trace(make_deps: MakeDeps) -> None:
    deps, index = counted(make_deps(ScriptedChatModel(dict(ANSWERING))))

    result = ask(deps, "What does --force-with-lease protect?")

    reads = {step.node: step.index_reads for step in result.trace}
    assert reads["retrieve"] == 1
    assert sum(reads.values()) == index.reads
    assert reads["moderate"] == reads["route"] == reads["generate"] == 0


@pytest.fixture
def wide_index(tmp_path: Path) -> Iterator[SqliteVectorIndex]:
    """Ten pages, each about its own made-up setting: top_k 2 shows two of them."""
    embedder = HashingEmbedder()
    chunks = [
        Chunk(
            f"p{n}-0",
            f"The setting core.knob{n} turns the dial of subsystem {n} to eleven.",
            f"page{n}.html",
            f"page {n}",
        )
        for n in range(10)
    ]
    index = SqliteVectorIndex(
        tmp_path / "wide.sqlite3", embedder.dimensions, embedder=embedder.name
    )
    index.upsert(chunks, embedder.embed([c.text for c in chunks]))
    yield index
    index.close()


def test_a_name_is_looked_up_once_per_request_however_many_grades_it_has(
    make_deps: MakeDeps, wide_index: SqliteVectorIndex
) -> None:
    # One passage shown: the first grade finds one of the two settings missing and
    # looks it up; the grade says no, the rewrite retrieves another page, and the
    # second grade finds both missing: it reads what the first lookup found, and
    # looks up only the other.
    chat = ScriptedChatModel(
        {
            "Triage": [{"abusive": False, "kind": "question"}],
            "judge": [False, False],
            "Rewrite": [{"query": "the dial of subsystem 9"}],
        }
    )
    deps = make_deps(chat)
    narrow = deps.settings.model_copy(update={"top_k": 1, "max_attempts": 2})
    counting = CountingIndex(wide_index)
    deps = dataclasses.replace(deps, index=counting, settings=narrow)

    result = ask(deps, "Is core.knob3 or core.knob5 louder?")

    assert len(result.grades) == 2
    first, second = (grade.grounding for grade in result.grades)
    assert len(first.in_index) == 1 and set(second.in_index) == {"core.knob3", "core.knob5"}
    for name in ("core.knob3", "core.knob5"):
        looked_up = [k for k in counting.lookups if name in k.split()]
        assert len(looked_up) == 1, (name, counting.lookups)


@dataclasses.dataclass
class Declining(EndlessChat):
    """A model whose script never runs out and whose grades all say no."""

    def _next(self, kind: str, messages: Sequence[Message]) -> Any:
        reply = super()._next(kind, messages)
        return False if kind == "judge" else reply


# Questions made of names, as many as fit in 1,000 characters: flags, settings,
# functions, versions, exit codes, backticked commands, product names.
NAME = st.one_of(
    st.from_regex(r"--[a-z][a-z0-9-]{1,12}[a-z0-9]", fullmatch=True),
    st.from_regex(r"[a-z]{2,8}\.[a-z]{2,10}", fullmatch=True),
    st.from_regex(r"[A-Z]{3,8}_[A-Z]{3,8}", fullmatch=True),
    st.from_regex(r"[a-z]{3,9}\(\)", fullmatch=True),
    st.from_regex(r"v?[0-9]{1,2}\.[0-9]{1,2}(\.[0-9]{1,2})?", fullmatch=True),
    st.from_regex(r"exit code [0-9]{1,3}", fullmatch=True),
    st.from_regex(r"`git [a-z]{3,9} -[a-zA-Z]`", fullmatch=True),
    st.from_regex(r"[a-z][A-Z][a-z]{1,6}|[A-Z][a-z]{2,6}[A-Z][a-z]{1,5}", fullmatch=True),
    st.from_regex(r"[A-Z][a-z]{3,8} [A-Z][a-z]{3,8}", fullmatch=True),
    st.sampled_from(["--force-with-lease", "GitHub", "git bisect", "125", "--amend"]),
)
SEPARATOR = st.sampled_from([" ", ", ", " and ", "; ", " or "])


@st.composite
def many_names(draw: st.DrawFn) -> str:
    parts = [draw(st.sampled_from(["What about", "Does", "Compare", "Why"]))]
    for _ in range(draw(st.integers(1, 300))):
        parts += [draw(SEPARATOR), draw(NAME)]
    return "".join(parts)[:1_000].strip() or "why"


@given(question=many_names())
@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_no_question_makes_more_index_reads_than_the_bound(
    tmp_path_factory: pytest.TempPathFactory, question: str
) -> None:
    from candor.backends.sqlite_state import SqliteStateStore
    from candor.settings import DEFAULT_PRICES, Settings
    from tests.conftest import PASSAGES

    folder = tmp_path_factory.mktemp("reads")
    base = Settings(
        data_dir=folder,
        embedder_backend="hashing",
        screening=False,
        cache_enabled=False,
        prices={**DEFAULT_PRICES, "scripted": DEFAULT_PRICES["gpt-4o-mini"]},
    )
    embedder = HashingEmbedder()
    inner = SqliteVectorIndex(base.index_path, embedder.dimensions, embedder=embedder.name)
    inner.upsert(PASSAGES, embedder.embed([c.text for c in PASSAGES]))
    state = SqliteStateStore(base.state_path)
    index = CountingIndex(inner)
    # Every grade says no: the most visits, rewrite and second grade included.
    deps = Deps(base, Declining(), embedder, index, None, state)
    try:
        result = ask(deps, question)
    finally:
        inner.close()
        state.close()

    assert index.reads <= bound(deps), (question, index.keywords)
    assert sum(step.index_reads for step in result.trace) == index.reads


def test_a_read_past_a_nodes_allowance_is_refused_before_it_is_sent(
    index: SqliteVectorIndex,
) -> None:
    counting = CountingIndex(index)
    metered = MeteredIndex(counting, Meter())

    metered.begin("grade")
    for _ in range(limits.INDEX_READS["grade"]):
        metered.query(vector=None, keywords="lease", top_k=1)
    with pytest.raises(RuntimeError, match="INDEX_READS"):
        metered.query(vector=None, keywords="lease", top_k=1)
    metered.begin("moderate")
    with pytest.raises(RuntimeError):
        metered.fetch(["a1-0"])

    assert counting.reads == limits.INDEX_READS["grade"]
    assert metered.take() == limits.INDEX_READS["grade"]


def test_the_fetch_bound_covers_the_most_neighbours_a_retrieval_fetches() -> None:
    from candor import index_reads, retrieval
    from candor.graph import prompts

    assert index_reads.MAX_FETCH_IDS >= prompts.MAX_PASSAGES * 2 * retrieval._REACH
