"""Delivering stored hand-offs: one attempt (`deliver`), and who makes the next one.

An attempt claims the hand-off (candor.handoffs.store), sends it to each channel
that has not taken it yet, and records what happened: delivered once every channel
took it; otherwise pending again, or failed after CANDOR_HANDOFF_MAX_ATTEMPTS
attempts. A failed hand-off is kept and listed (`candor handoffs list`), and
`candor handoffs retry` tries it again: nothing is dropped.

Who retries: on AWS the ask function puts the hand-off's id on a queue
(QueueForwarder); the hand-off function makes one attempt per message and reports
a failed one back, so that SQS delivers it again after its visibility timeout,
and moves it to the dead-letter queue after the last. Elsewhere (`candor serve`)
the process that stored it retries it itself (LocalForwarder), waiting longer
each time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

from candor import secrets as keys
from candor.errors import ConfigurationError
from candor.handoffs import forward
from candor.handoffs.store import Handoff, HandoffState, HandoffStore
from candor.handoffs.transcript import Content
from candor.settings import Settings
from candor.withheld import type_name

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

logger = logging.getLogger(__name__)

# How long one attempt may hold a hand-off: far above the webhook's timeout and an
# SES call, so that a live attempt is never overtaken by a second one.
LEASE_SECONDS = 120
MAX_RETRY_WAIT_SECONDS = 3600
Send = Callable[[Handoff, Content], None]


def senders_for(settings: Settings) -> dict[str, Send]:
    """A sender per configured channel; keys and clients are made on first use."""
    senders: dict[str, Send] = {}
    url = settings.handoff_webhook_url
    if url:

        @cache
        def secret() -> str:
            value = keys.optional_secret(
                direct=settings.handoff_webhook_secret,
                parameter=settings.handoff_webhook_secret_parameter,
                region=settings.aws_region,
            )
            if not value:
                raise ConfigurationError(
                    "CANDOR_HANDOFF_WEBHOOK_URL is set without CANDOR_HANDOFF_WEBHOOK_SECRET "
                    "(or its _PARAMETER): the webhook would be unsigned"
                )
            return value

        def webhook(handoff: Handoff, content: Content) -> None:
            forward.send_webhook(
                url,
                handoff,
                content,
                secret=secret(),
                allow_internal=settings.handoff_webhook_allow_internal,
            )

        senders["webhook"] = webhook
    owner, sender = settings.handoff_email_to, settings.handoff_email_from
    if owner and sender:

        @cache
        def ses() -> Any:
            import boto3

            return boto3.client("sesv2", region_name=settings.aws_region)

        def email(handoff: Handoff, content: Content) -> None:
            forward.send_email(ses(), handoff, content, sender=sender, owner=owner)

        senders["email"] = email
    return senders


def deliver(
    store: HandoffStore,
    senders: Mapping[str, Send],
    handoff_id: str,
    *,
    max_attempts: int,
    now: float | None = None,
) -> Handoff | None:
    """One attempt; the hand-off as it stands after it, or None when it could not be
    claimed (unknown, expired, delivered already, or another attempt holds it)."""
    now = time.time() if now is None else now
    claimed = store.claim_handoff(handoff_id, lease_until=now + LEASE_SECONDS, now=now)
    if claimed is None:
        return None
    content = Content.from_json(claimed.body)
    delivered = list(claimed.delivered_to)
    errors: list[str] = []
    for channel, send in senders.items():
        if channel in delivered:
            continue  # it took the hand-off on an earlier attempt: not twice
        try:
            send(claimed, content)
        except forward.DeliveryError as error:
            errors.append(str(error))
        except Exception as error:
            # A bug or a missing key: recorded like a failed send, so the hand-off waits.
            logger.exception("hand-off %s: %s failed", handoff_id, channel)
            errors.append(f"{channel}: {type_name(error)}")
        else:
            delivered.append(channel)
    state: HandoffState = "delivered"
    if errors:
        state = "failed" if claimed.attempts >= max_attempts else "pending"
        logger.warning(
            "hand-off %s attempt %d: %s", handoff_id, claimed.attempts, "; ".join(errors)
        )
    summary = "; ".join(errors)[:500]
    store.finish_attempt(handoff_id, state=state, delivered_to=tuple(delivered), error=summary)
    return replace(
        claimed, state=state, delivered_to=tuple(delivered), last_error=summary, lease_until=0.0
    )


class Forwarder(Protocol):
    """Makes sure a stored hand-off gets its attempts."""

    async def dispatch(self, handoff_id: str) -> None: ...


@dataclass
class LocalForwarder:
    """Attempts now, then after `retry_seconds`, doubling up to an hour each time, in
    this process, until delivered or `max_attempts` are spent. The first dispatch also
    picks up what an earlier process left pending (today's and yesterday's)."""

    store: HandoffStore
    senders: Mapping[str, Send]
    max_attempts: int
    retry_seconds: float
    _running: set[asyncio.Task[None]] = field(default_factory=set)
    _swept: bool = False

    async def dispatch(self, handoff_id: str) -> None:
        self._start(handoff_id)
        if not self._swept:
            self._swept = True
            for handoff in await asyncio.to_thread(self._left_pending):
                if handoff.id != handoff_id:
                    self._start(handoff.id)

    def _start(self, handoff_id: str) -> None:
        task = asyncio.create_task(self._attempts(handoff_id), name=f"handoff-{handoff_id}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    def _left_pending(self) -> list[Handoff]:
        now = time.time()
        today = datetime.fromtimestamp(now, UTC).date()
        days = (today - timedelta(days=1), today)
        return [
            handoff
            for day in days
            for handoff in self.store.handoffs_on(day.isoformat(), now=now)
            if handoff.state == "pending"
        ]

    async def _attempts(self, handoff_id: str) -> None:
        wait = self.retry_seconds
        for _ in range(self.max_attempts):  # each pass claims one attempt, or stops
            try:
                after = await asyncio.to_thread(
                    deliver, self.store, self.senders, handoff_id, max_attempts=self.max_attempts
                )
            except Exception:
                logger.exception("hand-off %s: the attempt could not be recorded", handoff_id)
                after = None
            if after is None or after.state != "pending":
                return
            await asyncio.sleep(wait)
            wait = min(wait * 2, MAX_RETRY_WAIT_SECONDS)

    async def idle(self) -> None:
        """Wait until every attempt this process started is over (tests, shutdown)."""
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)


@dataclass
class QueueForwarder:
    """Puts the hand-off's id on the SQS queue the hand-off function reads."""

    queue_url: str
    region: str | None = None
    client: SQSClient | None = None

    async def dispatch(self, handoff_id: str) -> None:
        await asyncio.to_thread(self._send, handoff_id)

    def _send(self, handoff_id: str) -> None:
        if self.client is None:
            import boto3

            self.client = boto3.client("sqs", region_name=self.region)
        self.client.send_message(
            QueueUrl=self.queue_url, MessageBody=json.dumps({"handoff_id": handoff_id})
        )


def forwarder_for(settings: Settings, store: HandoffStore) -> Forwarder:
    if settings.handoff_queue_url:
        return QueueForwarder(settings.handoff_queue_url, region=settings.aws_region)
    return LocalForwarder(
        store,
        senders_for(settings),
        max_attempts=settings.handoff_max_attempts,
        retry_seconds=settings.handoff_retry_seconds,
    )


def handle_queue_event(
    event: Mapping[str, Any],
    store: HandoffStore,
    senders: Mapping[str, Send],
    *,
    max_attempts: int,
) -> dict[str, list[dict[str, str]]]:
    """The hand-off function's work: one attempt per SQS record. A record whose attempt
    failed is reported back (ReportBatchItemFailures) for SQS to deliver again."""
    failures: list[dict[str, str]] = []
    for record in event.get("Records", []):
        message_id = str(record.get("messageId", ""))
        try:
            handoff_id = str(json.loads(record["body"])["handoff_id"])
        except (KeyError, TypeError, ValueError):
            logger.error("hand-off queue: a message without a hand-off id was dropped")
            continue  # never deliverable: retrying it would only reach the DLQ later
        try:
            after = deliver(store, senders, handoff_id, max_attempts=max_attempts)
        except Exception:
            logger.exception("hand-off %s: the attempt could not be made", handoff_id)
            failures.append({"itemIdentifier": message_id})
            continue
        if after is not None and after.state == "pending":
            failures.append({"itemIdentifier": message_id})
        elif after is None:
            current = store.get_handoff(handoff_id, now=time.time())
            # Held by another attempt: try again after the visibility timeout.
            if current is not None and current.state == "pending":
                failures.append({"itemIdentifier": message_id})
    return {"batchItemFailures": failures}
