"""Shared fixtures: a small real index and state store, and a scripted chat model."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from candor.backends.hashing_embedder import HashingEmbedder
from candor.backends.sqlite_index import SqliteVectorIndex
from candor.backends.sqlite_state import SqliteStateStore
from candor.deps import Deps
from candor.settings import DEFAULT_PRICES, Settings
from candor.types import Chunk
from tests.support.fakes import ScriptedChatModel

PASSAGES = [
    Chunk(
        "a1-0",
        "--force-with-lease protects the remote ref: the push is refused unless the "
        "remote ref still points at the commit your remote-tracking branch records.",
        "git-push.html",
        "git-push(1)",
        "OPTIONS > --force-with-lease",
    ),
    Chunk(
        "b2-0",
        "git commit --amend replaces the tip of the current branch with a new commit, "
        "so you can fix a typo in the last commit message.",
        "git-commit.html",
        "git-commit(1)",
        "OPTIONS > --amend",
    ),
    Chunk(
        "c3-0",
        "git bisect run uses the exit code of the script: 125 means the commit cannot "
        "be tested and should be skipped.",
        "git-bisect.html",
        "git-bisect(1)",
        "Bisect run",
    ),
]


def clear_candor_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset every CANDOR_* variable, so no setting from the developer's shell leaks in."""
    for name in list(os.environ):
        if name.startswith("CANDOR_"):
            monkeypatch.delenv(name)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(
        data_dir=tmp_path / "data",
        embedder_backend="hashing",
        site_name="Example Docs",
        contact="help@example.com",
        max_attempts=2,
        top_k=3,
        # The budget reserves from the chat model's price; the scripted model costs
        # what gpt-4o-mini costs, a few tenths of a cent per request at most.
        prices={**DEFAULT_PRICES, "scripted": DEFAULT_PRICES["gpt-4o-mini"]},
        # The scripted tests describe the model's path through moderate, which the
        # screening classifier would skip for a message it is sure of: they turn it
        # off. tests/unit/test_screening_graph.py runs the graph with it on.
        screening=False,
        # Likewise the grade: with it on, a question naming what its passages show
        # (most of these tests ask about `gc.auto`) makes no grade call.
        # tests/unit/test_grade_by_names.py runs the graph with it on.
        grade_by_names=False,
        # Starter questions are proposed with model calls a test did not script:
        # tests/unit/test_suggestions.py turns them on.
        suggest_questions=False,
    )


@pytest.fixture
def index(settings: Settings) -> Iterator[SqliteVectorIndex]:
    embedder = HashingEmbedder()
    index = SqliteVectorIndex(settings.index_path, embedder.dimensions, embedder=embedder.name)
    index.upsert(PASSAGES, embedder.embed([c.text for c in PASSAGES]))
    yield index
    index.close()


@pytest.fixture
def state(settings: Settings) -> Iterator[SqliteStateStore]:
    store = SqliteStateStore(settings.state_path)
    yield store
    store.close()


MakeDeps = Callable[[ScriptedChatModel], Deps]


@pytest.fixture
def make_deps(settings: Settings, index: SqliteVectorIndex, state: SqliteStateStore) -> MakeDeps:
    def make(chat: ScriptedChatModel) -> Deps:
        return Deps(settings, chat, HashingEmbedder(), index, None, state)

    return make


FAKE_AWS_REGION = "eu-west-1"


@pytest.fixture
def fake_aws_credentials(monkeypatch: pytest.MonkeyPatch) -> str:
    """AWS credentials and a region in the environment, where boto3 looks; returns the region.

    moto and DynamoDB Local take any credentials. Fake ones mean that boto3 never
    reads the developer's own (~/.aws, a profile): a call that missed its fake
    endpoint could not act on a real account.
    """
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", FAKE_AWS_REGION)
    return FAKE_AWS_REGION


@pytest.fixture(scope="session")
def dynamodb_endpoint() -> Iterator[str]:
    """DynamoDB Local on a free port for the whole test session, stopped at its end.

    Skipped where it cannot run, unless CANDOR_REQUIRE_DYNAMODB_LOCAL=1 (`make test`).
    """
    from tests.support.dynamodb_local import REQUIRE_ENV, DynamoDBLocal, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    with DynamoDBLocal() as endpoint:
        yield endpoint


class SocketInUnitTest(RuntimeError):
    """A test marked `unit` tried to open a network connection; mark it `integration`."""


@pytest.fixture(autouse=True)
def _no_sockets_in_unit_tests(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Unit tests run in-process (ASGI clients, SQLite files): a connection attempt,
    # even to loopback, means the test belongs in `integration`.
    if request.node.get_closest_marker("unit") is None:
        return

    def refuse(*args: object, **kwargs: object) -> None:
        raise SocketInUnitTest(f"{request.node.nodeid} opened a socket")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
