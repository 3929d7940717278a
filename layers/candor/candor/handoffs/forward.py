"""Forwarding a hand-off to the owner: a signed webhook, an e-mail through SES.

The webhook gets one JSON POST: a Slack-compatible `text` (an incoming webhook of
Slack, Mattermost or Rocket.Chat shows it as the message) and the structured
`handoff` beside it for a helpdesk. It is signed as Stripe and Slack sign theirs:

    X-Candor-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">

under the owner's webhook secret, so a receiver can check that candor sent it and
refuse a replay whose time is old (candor.handoffs.forward.verify shows how). The
POST goes only where candor.outbound allows, and follows no redirect; any answer
but 2xx is a failed attempt.

The e-mail is sent from the owner's SES-verified address to the owner; the
visitor's address appears only in Reply-To and in the body. The message is built
with Python's e-mail package under its SMTP policy, which refuses a header value
holding a line break; the subject is fixed words and the site's name on one line,
and the visitor's address was checked by email-validator, so nothing a visitor
typed can add a header.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from candor import outbound
from candor.errors import CandorError
from candor.handoffs.store import Handoff
from candor.handoffs.transcript import Content, Entry

if TYPE_CHECKING:
    from mypy_boto3_sesv2 import SESV2Client

SIGNATURE_HEADER = "X-Candor-Signature"
ID_HEADER = "X-Candor-Handoff-Id"
WEBHOOK_TIMEOUT_SECONDS = 10.0
# A receiver should refuse a signature older than this (a replayed request).
SIGNATURE_TOLERANCE_SECONDS = 300
# Slack shows at most about 40,000 characters of `text`; the structured field has all.
TEXT_CHARS = 12_000


class DeliveryError(CandorError):
    """A channel did not take the hand-off; the attempt is retried later."""


def sign(body: bytes, secret: str, *, now: float) -> str:
    stamp = str(int(now))
    mac = hmac.new(secret.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={stamp},v1={mac}"


def verify(body: bytes, header: str, secret: str, *, now: float | None = None) -> bool:
    """What a receiver does: True when `header` signs `body` under `secret`, recently."""
    parts = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    stamp, mac = parts.get("t", ""), parts.get("v1", "")
    if not stamp.isdigit():
        return False
    now = time.time() if now is None else now
    if abs(now - int(stamp)) > SIGNATURE_TOLERANCE_SECONDS:
        return False
    expected = hmac.new(secret.encode(), stamp.encode() + b"." + body, hashlib.sha256)
    return hmac.compare_digest(mac, expected.hexdigest())


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _entry_lines(number: int, entry: Entry) -> list[str]:
    lines = [
        f"{number}. Visitor: {entry.question}",
        f"   candor ({entry.decision}): {entry.answer}",
    ]
    for source in entry.sources:
        lines.append(f"   source: {source.title}" + (f" <{source.url}>" if source.url else ""))
    return lines


def plain_text(handoff: Handoff, content: Content) -> str:
    """The hand-off as a person reads it: the e-mail's body and the webhook's `text`."""
    lines = [
        f"A visitor of {content.site_name} asks for a person"
        + (" after candor could not answer." if content.after_decline else "."),
        "",
        f"Reply to: {content.email}",
        f"Sent: {_when(handoff.created_at)}",
        f"Hand-off: {handoff.id}",
        "",
        "Their message:",
        content.message,
        "",
    ]
    if content.transcript:
        heading = "The conversation"
        if content.scope == "window":
            heading += f" (its last {content.window_minutes} minutes, all candor keeps)"
        lines.append(heading + ":")
        for number, entry in enumerate(content.transcript, 1):
            lines.extend(_entry_lines(number, entry))
    elif content.scope == "window":
        lines.append(
            f"No conversation is attached: candor keeps it only {content.window_minutes} "
            "minutes after the last question."
        )
    else:
        lines.append("The visitor asked nothing before writing.")
    return "\n".join(lines)


def webhook_body(handoff: Handoff, content: Content) -> bytes:
    text = plain_text(handoff, content)
    if len(text) > TEXT_CHARS:
        text = text[: TEXT_CHARS - 1] + "…"
    payload: dict[str, Any] = {
        "text": text,
        "handoff": {
            "id": handoff.id,
            "created_at": handoff.created_at,
            "site": content.site_name,
            "email": content.email,
            "message": content.message,
            "after_decline": content.after_decline,
            "transcript_scope": content.scope,
            "window_minutes": content.window_minutes,
            "transcript": [
                {
                    "question": e.question,
                    "answer": e.answer,
                    "decision": e.decision,
                    "sources": [{"title": s.title, "url": s.url} for s in e.sources],
                    "trace_id": e.trace_id,
                    "asked_at": e.asked_at,
                }
                for e in content.transcript
            ],
        },
    }
    return json.dumps(payload, ensure_ascii=False).encode()


def send_webhook(
    url: str,
    handoff: Handoff,
    content: Content,
    *,
    secret: str,
    allow_internal: bool = False,
    now: Callable[[], float] = time.time,
    resolve: outbound.Resolver = outbound.system_resolver,
) -> None:
    """POST the hand-off, signed; DeliveryError unless the receiver answers 2xx."""
    from urllib.parse import urlsplit

    body = webhook_body(handoff, content)
    headers = {
        "content-type": "application/json; charset=utf-8",
        "user-agent": "candor-handoff/1",
        SIGNATURE_HEADER: sign(body, secret, now=now()),
        ID_HEADER: handoff.id,
    }
    host = urlsplit(url).hostname or ""
    try:
        reply = outbound.post(
            url,
            body,
            headers,
            timeout=WEBHOOK_TIMEOUT_SECONDS,
            allowed_hosts=(host,) if allow_internal else (),
            resolve=resolve,
        )
    except CandorError as error:
        raise DeliveryError(f"webhook: {error}") from error
    if not 200 <= reply.status < 300:
        raise DeliveryError(f"webhook answered {reply.status}")


def subject(content: Content) -> str:
    # Fixed words and the owner's own site name, one line: nothing the visitor wrote.
    site = " ".join(content.site_name.split())[:80]
    return f"candor hand-off from a visitor of {site}"


def email_message(handoff: Handoff, content: Content, *, sender: str, owner: str) -> bytes:
    """The e-mail as SES sends it: From the owner's verified address, To the owner,
    Reply-To the visitor. Python's SMTP policy refuses a header value with a line
    break, so no value can start a header of its own."""
    from email.message import EmailMessage
    from email.policy import SMTP

    message = EmailMessage(policy=SMTP)
    message["From"] = sender
    message["To"] = owner
    message["Reply-To"] = content.email
    message["Subject"] = subject(content)
    message["X-Candor-Handoff-Id"] = handoff.id
    message.set_content(plain_text(handoff, content))
    return message.as_bytes()


def send_email(
    ses: SESV2Client, handoff: Handoff, content: Content, *, sender: str, owner: str
) -> None:
    """One e-mail through SES (v2 SendEmail, the message built here) from `sender` to `owner`."""
    from botocore.exceptions import BotoCoreError, ClientError

    raw = email_message(handoff, content, sender=sender, owner=owner)
    try:
        ses.send_email(
            FromEmailAddress=sender,
            Destination={"ToAddresses": [owner]},
            Content={"Raw": {"Data": raw}},
        )
    except (ClientError, BotoCoreError) as error:
        code = (
            error.response.get("Error", {}).get("Code", "unknown")
            if isinstance(error, ClientError)
            else type(error).__name__
        )
        raise DeliveryError(f"email: SES refused: {code}") from error
