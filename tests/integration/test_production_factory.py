"""Settings build the production backends: OpenAI and Pinecone, keys from SSM (moto)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws
from pydantic import SecretStr

from candor import secrets
from candor.backends.openai_chat import OpenAIChatModel
from candor.backends.openai_embedder import OpenAIEmbedder
from candor.backends.pinecone_index import PineconeVectorIndex
from candor.errors import ConfigurationError
from candor.factory import build_chat, build_embedder, build_index, build_state
from candor.ingest.pipeline import count_documents, ingest
from candor.retrieval import search
from candor.settings import Settings
from tests.support import openai_server, pinecone_server
from tests.support.dynamodb_local import create_state_table

pytestmark = pytest.mark.integration

REGION = "eu-west-1"


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, fake_aws_credentials: str) -> Iterator[None]:
    for name in ("OPENAI_API_KEY", "PINECONE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    secrets.forget()
    yield
    secrets.forget()


def test_openai_backends_are_built_from_settings() -> None:
    with openai_server.serve() as server:
        settings = Settings(
            chat_backend="openai",
            embedder_backend="openai",
            chat_model="gpt-4.1-nano",
            embedding_dimensions=512,
            openai_api_key=SecretStr("sk-test"),
            openai_base_url=server.base_url,
        )
        server.fake.chat.append(openai_server.Reply(content="hello", usage=(10, 1)))

        chat = build_chat(settings)
        embedder = build_embedder(settings)
        reply = asyncio.run(chat.text([{"role": "user", "content": "hi"}]))

    assert isinstance(chat, OpenAIChatModel) and chat.name == "gpt-4.1-nano"
    assert isinstance(embedder, OpenAIEmbedder) and embedder.dimensions == 512
    assert reply.usage.cost_usd == pytest.approx((10 * 0.10 + 1 * 0.40) / 1e6)


def test_an_unpriced_chat_model_is_refused_at_start() -> None:
    settings = Settings(
        chat_backend="openai", chat_model="gpt-unpriced", openai_api_key=SecretStr("k")
    )
    with pytest.raises(ConfigurationError, match="no price"):
        build_chat(settings)


def test_without_any_key_the_error_names_every_way_to_give_one() -> None:
    with pytest.raises(ConfigurationError) as raised:
        build_chat(Settings(chat_backend="openai"))
    message = str(raised.value)
    for way in ("CANDOR_OPENAI_API_KEY", "CANDOR_OPENAI_API_KEY_PARAMETER", "OPENAI_API_KEY"):
        assert way in message


def test_the_key_is_read_from_an_ssm_secure_string_once_per_process() -> None:
    with mock_aws():
        ssm = boto3.client("ssm", region_name=REGION)
        ssm.put_parameter(Name="/candor/openai-api-key", Value="sk-from-ssm", Type="SecureString")
        settings = Settings(
            chat_backend="openai",
            openai_api_key_parameter="/candor/openai-api-key",
            aws_region=REGION,
        )

        first = build_chat(settings)
        ssm.delete_parameter(Name="/candor/openai-api-key")
        second = build_chat(settings)  # a second build does not call SSM again

    assert isinstance(first, OpenAIChatModel) and isinstance(second, OpenAIChatModel)
    assert first.client().api_key == second.client().api_key == "sk-from-ssm"


def test_a_missing_ssm_parameter_is_a_configuration_error() -> None:
    with mock_aws():
        settings = Settings(
            embedder_backend="openai",
            openai_api_key_parameter="/candor/missing",
            aws_region=REGION,
        )
        with pytest.raises(ConfigurationError, match="/candor/missing: ParameterNotFound"):
            build_embedder(settings)


def test_pinecone_needs_a_host() -> None:
    settings = Settings(index_backend="pinecone", pinecone_api_key=SecretStr("k"))
    with pytest.raises(ConfigurationError, match="CANDOR_PINECONE_HOST"):
        build_index(settings, build_embedder(Settings(embedder_backend="hashing")))


def test_the_pinecone_index_built_from_settings_serves_hybrid_search_per_site() -> None:
    embedder = build_embedder(Settings(embedder_backend="hashing"))
    with (
        pinecone_server.serve("dense", embedder.dimensions) as dense,
        pinecone_server.serve("sparse") as sparse,
    ):

        def site(name: str) -> PineconeVectorIndex:
            index = build_index(
                Settings(
                    index_backend="pinecone",
                    index_name=name,
                    pinecone_host=dense.url,
                    pinecone_sparse_host=sparse.url,
                    pinecone_api_key=SecretStr("pc-test"),
                ),
                embedder,
            )
            assert isinstance(index, PineconeVectorIndex)
            return index

        kites, boats = site("kites"), site("boats")
        ingest(
            [("winch.md", b"# Winch\n\nThe winch coils loose lines.\n")],
            embedder=embedder,
            index=kites,
        )
        ingest(
            [("hull.md", b"# Hull\n\nScrub the hull in spring.\n")], embedder=embedder, index=boats
        )
        hits = search(
            "winch lines",
            embedder=embedder,
            index=kites,
            reranker=None,
            top_k=3,
            candidates=10,
            strategy="hybrid",
        )

        assert [h.chunk.source for h in hits] == ["winch.md"]
        assert (kites.count(), boats.count()) == (1, 1)
        assert count_documents(kites) == 1
        assert set(dense.index.namespaces) == set(sparse.index.namespaces) == {"kites", "boats"}


# The session store built from settings keeps a session as long as its id is accepted.

MONTHS_3 = 90 * 86_400


def test_a_dynamodb_session_lasts_as_long_as_a_non_default_session_max_age() -> None:
    # The defect: build_state left the DynamoDB store at its 30-day default, so with
    # CANDOR_SESSION_MAX_AGE_SECONDS at 90 days an ended session's record expired on
    # day 30 and its id, still accepted, could ask again as a fresh session.
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name=REGION)
        table = create_state_table(dynamodb)
        settings = Settings(
            state_backend="dynamodb",
            state_table=table,
            aws_region=REGION,
            session_max_age_seconds=MONTHS_3,
        )
        store = build_state(settings)
        before = time.time()

        store.record_offence("s-ended-0001")
        store.record_offence("s-ended-0001")

        item = dynamodb.get_item(
            TableName=table, Key={"pk": {"S": "session#s-ended-0001"}, "sk": {"S": "session"}}
        )["Item"]
        assert store.session_status("s-ended-0001") == "ended"
    assert before + MONTHS_3 - 1 <= int(item["expires_at"]["N"]) <= time.time() + MONTHS_3
