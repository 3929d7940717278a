"""`make invoke FN=ask|feedback|ingest|handoff|sync|gaps EVENT=events/NAME.json`: one invocation.

Runs the real handler module (functions/<FN>/app.py) with the event and a Lambda
context, on whatever backends the CANDOR_* settings name: unset, the embedded
default (the local model, the SQLite index and state in .candor/), the same as
`candor serve`. The handler's log lines and metric documents go to stdout as on
Lambda; the response is printed last, on its own, as JSON.

The environment is the Lambda runtime's as far as the handlers can tell
(AWS_LAMBDA_FUNCTION_NAME, POWERTOOLS_SERVICE_NAME, a region), with AWS_SAM_LOCAL
set as `sam local invoke` sets it, so Powertools sends no X-Ray segments. For an
S3 event, S3 is moto's in-process one: each bucket the event names is created, and
each key it names as created holds the file of that name in events/objects/ (a
key with no file there, or named as removed, has no object, as after a delete).

For the sync function, the docs site is the tests' fixture site
(tests/support/sites.py) served on loopback, and S3 and SQS are moto's: the event
is handled (`{site}` in it stands for the fixture site's URL), then every message
it sent to the sync queue is handled in turn, each as one invocation, until the
queue is empty; the objects the sync wrote under site/ are listed last. Its state
is a SQLite file in a temporary folder, so each run is a first sync.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from unittest import mock
from urllib.parse import unquote_plus

from tests.support.lambda_ import ROOT, LambdaContext, load_handler

FUNCTIONS = ("ask", "feedback", "ingest", "handoff", "sync", "gaps")
OBJECTS = ROOT / "events" / "objects"
REGION = "eu-west-1"
INVOKE_ORIGIN = "https://docs.example.com"
INVOKE_SESSION_SECRET = "make-invoke-local-session-key-not-for-production"
# The server key events/mcp.json and events/chat-completions.json send in X-Api-Key.
INVOKE_API_KEY = "make-invoke-local-server-key"


def lambda_environment(function: str) -> dict[str, str]:
    return {
        "AWS_LAMBDA_FUNCTION_NAME": f"candor-{function}",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
        "AWS_SAM_LOCAL": "true",
        "AWS_REGION": os.environ.get("AWS_REGION", REGION),
        "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", REGION),
        "POWERTOOLS_SERVICE_NAME": f"candor-{function}",
        "POWERTOOLS_TRACE_DISABLED": "true",
        # The API functions refuse to start without these (the template sets them):
        # the origin the events in events/ come from, and a session key for this machine.
        "CANDOR_ALLOWED_ORIGINS": os.environ.get("CANDOR_ALLOWED_ORIGINS", INVOKE_ORIGIN),
        "CANDOR_SESSION_SECRET": os.environ.get("CANDOR_SESSION_SECRET", INVOKE_SESSION_SECRET),
        "CANDOR_API_KEYS": os.environ.get("CANDOR_API_KEYS", INVOKE_API_KEY),
    }


@contextlib.contextmanager
def local_s3(event: dict[str, Any], objects: Path = OBJECTS) -> Iterator[None]:
    """moto's S3, holding the event's buckets and what objects/ has for their keys."""
    import boto3
    from moto import mock_aws

    fake_credentials = {
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_SESSION_TOKEN": "local",
    }
    with mock.patch.dict(os.environ, fake_credentials), mock_aws():
        region = os.environ["AWS_DEFAULT_REGION"]
        s3 = boto3.client("s3", region_name=region)
        records = event.get("Records", [])
        buckets = {r["s3"]["bucket"]["name"] for r in records}
        if "Bucket" in event:  # s3:TestEvent
            buckets.add(event["Bucket"])
        for bucket in buckets:
            where: Any = {"LocationConstraint": region}
            s3.create_bucket(Bucket=bucket, CreateBucketConfiguration=where)
        for record in records:
            # Keys arrive URL-encoded, as S3 sends them.
            key = unquote_plus(record["s3"]["object"]["key"])
            path = objects / key
            if record["eventName"].startswith("ObjectCreated") and path.is_file():
                bucket = record["s3"]["bucket"]["name"]
                s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
        yield


def invoke(
    function: str,
    event: dict[str, Any],
    *,
    prepare: Callable[[ModuleType], None] | None = None,
) -> Any:
    """Load functions/<function>/app.py fresh and call its handler once.

    `prepare` sees the loaded module before the call (the tests hand it their
    backends there). The caller's environment should already be
    `lambda_environment(function)`.
    """
    from candor.settings import get_settings

    get_settings.cache_clear()  # the settings of this environment, not of an earlier one
    module = load_handler(function)
    if prepare is not None:
        prepare(module)
    context = LambdaContext(function_name=f"candor-{function}")
    with local_s3(event) if function == "ingest" else contextlib.nullcontext():
        return module.handler(event, context)


def with_signed_session(event: dict[str, Any]) -> dict[str, Any]:
    """The event with its body's session id signed by this environment's session key.

    A session id in a file cannot be signed ahead of time (signed ids expire), so
    the id is issued now, as the server would have issued it to the visitor.
    """
    body = json.loads(event.get("body") or "null")
    if not isinstance(body, dict) or "session_id" not in body:
        return event
    from candor.api.sessions import signer_for
    from candor.settings import Settings

    body["session_id"] = signer_for(Settings()).issue()
    return event | {"body": json.dumps(body)}


SYNC_BUCKET = "candor-docs-invoke"
# The most queued steps `make invoke FN=sync` handles before it gives up.
MAX_SYNC_STEPS = 50


def invoke_sync(event: dict[str, Any]) -> dict[str, Any]:
    """The sync event against the fixture site, then every step it queued, in turn."""
    import tempfile

    import boto3
    from moto import mock_aws

    from tests.support.site_server import SiteServer
    from tests.support.sites import build_site

    fake_credentials = {
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_SESSION_TOKEN": "local",
    }
    with (
        SiteServer() as site,
        tempfile.TemporaryDirectory() as data,
        mock.patch.dict(os.environ, fake_credentials),
        mock_aws(),
    ):
        build_site(site)
        region = os.environ["AWS_DEFAULT_REGION"]
        s3 = boto3.client("s3", region_name=region)
        where: Any = {"LocationConstraint": region}
        s3.create_bucket(Bucket=SYNC_BUCKET, CreateBucketConfiguration=where)
        sqs = boto3.client("sqs", region_name=region)
        queue = sqs.create_queue(QueueName="candor-sync")["QueueUrl"]
        settings = {
            "CANDOR_DATA_DIR": data,
            "CANDOR_SYNC_SITES": site.url,
            "CANDOR_DOCUMENTS_BUCKET": SYNC_BUCKET,
            "CANDOR_SYNC_QUEUE_URL": queue,
            "CANDOR_SYNC_DELAY_SECONDS": os.environ.get("CANDOR_SYNC_DELAY_SECONDS", "0.1"),
        }
        with mock.patch.dict(os.environ, settings):
            event = json.loads(json.dumps(event).replace("{site}", site.url))
            responses = [invoke("sync", event)]
            for _ in range(MAX_SYNC_STEPS):
                got = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=1)
                messages = got.get("Messages", [])
                if not messages:
                    break
                (message,) = messages
                sqs.delete_message(QueueUrl=queue, ReceiptHandle=message["ReceiptHandle"])
                responses.append(invoke("sync", sqs_event(message, queue)))
        listed = s3.list_objects_v2(Bucket=SYNC_BUCKET, Prefix="site/").get("Contents", [])
        objects = []
        for item in listed:
            head = s3.head_object(Bucket=SYNC_BUCKET, Key=item["Key"])
            objects.append(
                {"key": item["Key"], "url": head["Metadata"].get("url"), "bytes": item["Size"]}
            )
        return {"invocations": responses, "objects": objects}


def sqs_event(message: Any, queue_url: str) -> dict[str, Any]:
    """An SQS message as the Lambda event source delivers it."""
    return {
        "Records": [
            {
                "messageId": message["MessageId"],
                "receiptHandle": message["ReceiptHandle"],
                "body": message["Body"],
                "attributes": {"ApproximateReceiveCount": "1"},
                "messageAttributes": {},
                "md5OfBody": message["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": f"arn:aws:sqs:{REGION}:123456789012:candor-sync",
                "awsRegion": REGION,
            }
        ]
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make invoke", description=__doc__.split("\n")[0])
    parser.add_argument("function", choices=FUNCTIONS)
    parser.add_argument("event", type=Path)
    args = parser.parse_args(argv)
    event = json.loads(args.event.read_text())
    with mock.patch.dict(os.environ, lambda_environment(args.function)):
        if args.function == "sync":
            response = invoke_sync(event)
        else:
            response = invoke(args.function, with_signed_session(event))
    sys.stdout.flush()
    print(json.dumps(response, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
