"""The fake AWS credentials that moto and DynamoDB Local take: one fixture sets them.

Seven test modules each spelled out the same environment (with "testing" or
"local", with or without a session token and a region). One fixture in
tests/conftest.py, `fake_aws_credentials`, now serves them all.
"""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[1]


def test_no_test_module_sets_aws_credentials_of_its_own() -> None:
    own = sorted(
        str(path.relative_to(TESTS))
        for path in TESTS.rglob("*.py")
        if path not in (TESTS / "conftest.py", Path(__file__).resolve())
        and "AWS_ACCESS_KEY_ID" in path.read_text()
    )
    assert own == [], "use the fake_aws_credentials fixture (tests/conftest.py)"


def test_boto3_finds_the_fake_credentials_and_region(fake_aws_credentials: str) -> None:
    from tests.conftest import FAKE_AWS_REGION

    session = boto3.Session()
    credentials = session.get_credentials()

    assert credentials is not None
    assert (credentials.access_key, credentials.secret_key) == ("testing", "testing")
    assert credentials.token == "testing"
    assert session.region_name == fake_aws_credentials == FAKE_AWS_REGION
