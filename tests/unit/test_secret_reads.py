"""Key reads from SSM: a failed read is remembered for a short backoff (moto's SSM).

Without it, a missing server-keys parameter meant one GetParameter per request
that sent X-Api-Key: an account-wide rate limit spent by anyone who sends a key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from candor import secrets
from candor.errors import ConfigurationError

pytestmark = pytest.mark.unit

REGION = "eu-west-1"
NAME = "/candor/api-keys"
BACKOFF = 10.0  # secrets.FAILED_READ_BACKOFF_SECONDS, as the docs state it


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch, fake_aws_credentials: str) -> Iterator[Clock]:
    fake = Clock()
    monkeypatch.setattr(secrets, "_clock", fake, raising=False)
    secrets.forget()
    yield fake
    secrets.forget()


def counted_client() -> tuple[Any, list[str]]:
    """An SSM client and the list of GetParameter calls it has sent."""
    client = boto3.client("ssm", region_name=REGION)
    calls: list[str] = []
    client.meta.events.register(
        "provide-client-params.ssm.GetParameter", lambda params, **_: calls.append(params["Name"])
    )
    return client, calls


def read(client: Any) -> str:
    return secrets.ssm_secure_string(NAME, region=REGION, client=client)


def test_key_reads_are_negatively_cached_for_a_short_backoff(clock: Clock) -> None:
    with mock_aws():
        client, calls = counted_client()
        for _ in range(50):  # fifty requests with X-Api-Key while the parameter is missing
            with pytest.raises(ConfigurationError, match="ParameterNotFound"):
                read(client)
        assert calls == [NAME]

        clock.now += BACKOFF - 0.1
        with pytest.raises(ConfigurationError):
            read(client)
        assert len(calls) == 1

        clock.now += 0.2
        with pytest.raises(ConfigurationError):
            read(client)
        assert len(calls) == 2  # asked again once the backoff is over


def test_a_parameter_created_after_a_failed_read_is_read_after_the_backoff(
    clock: Clock,
) -> None:
    with mock_aws():
        client, calls = counted_client()
        with pytest.raises(ConfigurationError):
            read(client)
        client.put_parameter(Name=NAME, Value="k1,k2", Type="SecureString")

        clock.now += BACKOFF
        assert read(client) == "k1,k2"
        clock.now += 3_600
        assert read(client) == "k1,k2"
        assert len(calls) == 2  # the value, once read, is kept


def test_an_empty_parameter_is_a_failed_read_too(clock: Clock) -> None:
    with mock_aws():
        client, calls = counted_client()
        client.put_parameter(Name=NAME, Value=" ", Type="SecureString")
        for _ in range(3):
            with pytest.raises(ConfigurationError, match="empty"):
                read(client)
        assert len(calls) == 1
