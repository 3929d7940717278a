"""DynamoDB Local for the tests and `make stress`: started on a free port, stopped after.

The server is the jar inside the npm package amplify-dynamodb-simulator, which
`scripts/dynamodb-local.sh install` puts under .candor/dynamodb-local/. Tables are
created from the StateTable resource of infra/template.yaml, so the schema the
tests use is the schema that is deployed.
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    import boto3
    from mypy_boto3_dynamodb import DynamoDBClient

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "infra" / "template.yaml"
EMULATOR = ROOT / ".candor/dynamodb-local/node_modules/amplify-dynamodb-simulator/emulator"
# `make test` sets this: a missing DynamoDB Local then fails the run instead of skipping.
REQUIRE_ENV = "CANDOR_REQUIRE_DYNAMODB_LOCAL"
READY_TIMEOUT_SECONDS = 60


def emulator_dir() -> Path:
    configured = os.environ.get("CANDOR_DYNAMODB_LOCAL_DIR")
    return Path(configured) if configured else EMULATOR


def unavailable_reason() -> str | None:
    """Why DynamoDB Local cannot start here, or None when it can."""
    if shutil.which("java") is None:
        return "DynamoDB Local needs java on PATH"
    if not (emulator_dir() / "DynamoDBLocal.jar").is_file():
        return (
            f"DynamoDB Local is not installed in {emulator_dir()}: "
            "run `scripts/dynamodb-local.sh install` (`make test` does)"
        )
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class DynamoDBLocal:
    """One in-memory DynamoDB Local process; `with DynamoDBLocal() as endpoint: ...`."""

    def __init__(self, emulator: Path | None = None) -> None:
        self.emulator = emulator or emulator_dir()
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        # Java's output, read back when it fails to start; open as long as the process runs.
        self._log = tempfile.TemporaryFile()  # noqa: SIM115

    def start(self) -> str:
        self._process = subprocess.Popen(
            [
                "java",
                "-Djava.library.path=./DynamoDBLocal_lib",
                "-jar",
                "DynamoDBLocal.jar",
                "-inMemory",
                "-sharedDb",
                "-disableTelemetry",
                "-port",
                str(self.port),
            ],
            cwd=self.emulator,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        self._wait_until_ready()
        return self.endpoint

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"DynamoDB Local exited at start:\n{self.output()}")
            try:
                client(self.endpoint).list_tables(Limit=1)
                return
            except Exception:  # not listening yet: connection refused or reset
                time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"DynamoDB Local was not ready in {READY_TIMEOUT_SECONDS} s")

    def output(self) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-4000:]

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
        self._log.close()

    def __enter__(self) -> str:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


_SESSION_LOCK = threading.Lock()


@functools.cache
def _session() -> boto3.session.Session:
    import boto3

    return boto3.session.Session()


def client(endpoint: str) -> DynamoDBClient:
    """A client of its own (its own connection pool), as each Lambda instance has.

    Clients come from one boto3 session, which loads the service model once
    (a fresh session per client costs about 0.2 s); the lock makes that safe.
    """
    from botocore.config import Config

    with _SESSION_LOCK:
        dynamodb: DynamoDBClient = _session().client(
            "dynamodb",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
            config=Config(connect_timeout=2, read_timeout=30, retries={"max_attempts": 2}),
        )
    return dynamodb


class _TemplateLoader(yaml.SafeLoader):
    """Reads CloudFormation's short-form tags (!Ref, !Sub, ...) as plain values."""


def _any_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    raise yaml.constructor.ConstructorError(None, None, f"unexpected node {node!r}")


_TemplateLoader.add_multi_constructor("!", _any_tag)


def load_template() -> dict[str, Any]:
    """infra/template.yaml with `!GetAtt StateTable.Arn` read as "StateTable.Arn" and so on."""
    template: dict[str, Any] = yaml.load(TEMPLATE.read_text(), Loader=_TemplateLoader)
    return template


def state_table_properties() -> dict[str, Any]:
    properties: dict[str, Any] = load_template()["Resources"]["StateTable"]["Properties"]
    return properties


def create_state_table(dynamodb: DynamoDBClient, name: str | None = None) -> str:
    """Create a table with the template's keys, indexes, billing mode and TTL; return its name."""
    name = name or f"candor-state-{uuid.uuid4().hex[:12]}"
    properties = state_table_properties()
    dynamodb.create_table(
        TableName=name,
        KeySchema=properties["KeySchema"],
        AttributeDefinitions=properties["AttributeDefinitions"],
        BillingMode=properties["BillingMode"],
        GlobalSecondaryIndexes=properties.get("GlobalSecondaryIndexes", []),
    )
    ttl = properties.get("TimeToLiveSpecification")
    if ttl:
        dynamodb.update_time_to_live(TableName=name, TimeToLiveSpecification=ttl)
    return name
