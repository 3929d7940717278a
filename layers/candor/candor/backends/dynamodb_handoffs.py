"""Hand-offs in the DynamoDB state table, under their own key prefix.

    pk                 sk        attributes
    handoff#<id>       handoff   session_id, created_at, body, state, attempts,
                                 delivered_to (JSON), last_error, lease_until,
                                 day_shard ("handoff#<YYYY-MM-DD>"), expires_at

The owner lists a day's hand-offs through the table's `by_day` index: its
partition `handoff#<day>` holds hand-offs alone (a trace's is "<day>#<n>"), a few
an hour at most, so one partition a day is plenty. The functions call only
GetItem and UpdateItem on `handoff#*` items (infra/template.yaml grants exactly
that); only `handoffs_on` (`candor handoffs list`, with the owner's credentials)
calls Query.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from candor.backends.dynamodb_table import DynamoDBTable
from candor.errors import StateStoreError
from candor.handoffs.store import Handoff, HandoffState

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

INDEX = "by_day"
INDEX_PARTITION = "day_shard"


def day_partition(day: str) -> str:
    return f"handoff#{day}"


def _key(handoff_id: str) -> dict[str, AttributeValueTypeDef]:
    return {"pk": {"S": f"handoff#{handoff_id}"}, "sk": {"S": "handoff"}}


def _n(value: float | int) -> AttributeValueTypeDef:
    return {"N": str(Decimal(repr(value)) if isinstance(value, float) else value)}


def _handoff(item: dict[str, Any]) -> Handoff:
    state: HandoffState = item["state"]["S"]
    return Handoff(
        id=str(item["pk"]["S"]).removeprefix("handoff#"),
        session_id=str(item["session_id"]["S"]),
        created_at=float(item["created_at"]["N"]),
        expires_at=int(item["expires_at"]["N"]),
        body=str(item["body"]["S"]),
        state=state,
        attempts=int(item["attempts"]["N"]),
        delivered_to=tuple(json.loads(item["delivered_to"]["S"])),
        last_error=str(item.get("last_error", {}).get("S", "")),
        lease_until=float(item.get("lease_until", {}).get("N", "0")),
    )


class DynamoDBHandoffStore(DynamoDBTable):
    def _update(self, handoff_id: str, **request: Any) -> dict[str, Any] | None:
        """One UpdateItem; its new attributes, or None when its condition failed."""
        try:
            response = self._client.update_item(
                TableName=self._table, Key=_key(handoff_id), ReturnValues="ALL_NEW", **request
            )
        except self._conflict:
            return None
        except (ClientError, BotoCoreError) as error:
            raise StateStoreError(f"DynamoDB UpdateItem failed: {_reason(error)}") from error
        attributes: dict[str, Any] = response.get("Attributes", {})
        return attributes

    def put_handoff(self, handoff: Handoff) -> bool:
        created = self._update(
            handoff.id,
            UpdateExpression="SET #session = :session, #created = :created, #body = :body, "
            "#state = :state, #attempts = :attempts, #delivered = :delivered, "
            "#error = :error, #lease = :lease, #day = :day, #expires = :expires",
            ConditionExpression="attribute_not_exists(#body)",
            ExpressionAttributeNames={
                "#session": "session_id",
                "#created": "created_at",
                "#body": "body",
                "#state": "state",
                "#attempts": "attempts",
                "#delivered": "delivered_to",
                "#error": "last_error",
                "#lease": "lease_until",
                "#day": INDEX_PARTITION,
                "#expires": "expires_at",
            },
            ExpressionAttributeValues={
                ":session": {"S": handoff.session_id},
                ":created": _n(handoff.created_at),
                ":body": {"S": handoff.body},
                ":state": {"S": handoff.state},
                ":attempts": _n(handoff.attempts),
                ":delivered": {"S": json.dumps(list(handoff.delivered_to))},
                ":error": {"S": handoff.last_error},
                ":lease": _n(handoff.lease_until),
                ":day": {"S": day_partition(handoff.day)},
                ":expires": _n(handoff.expires_at),
            },
        )
        return created is not None

    def get_handoff(self, handoff_id: str, *, now: float) -> Handoff | None:
        try:
            response = self._client.get_item(
                TableName=self._table, Key=_key(handoff_id), ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as error:
            raise StateStoreError(f"DynamoDB GetItem failed: {_reason(error)}") from error
        item = response.get("Item")
        if item is None or "body" not in item:
            return None
        handoff = _handoff(item)
        return handoff if handoff.expires_at > now else None

    def claim_handoff(self, handoff_id: str, *, lease_until: float, now: float) -> Handoff | None:
        # A comparison with a missing attribute is false: no hand-off, no write.
        claimed = self._update(
            handoff_id,
            UpdateExpression="SET #lease = :lease ADD #attempts :one",
            ConditionExpression="#state <> :delivered AND #lease <= :now AND #expires > :now",
            ExpressionAttributeNames={
                "#lease": "lease_until",
                "#attempts": "attempts",
                "#state": "state",
                "#expires": "expires_at",
            },
            ExpressionAttributeValues={
                ":lease": _n(lease_until),
                ":one": _n(1),
                ":delivered": {"S": "delivered"},
                ":now": _n(now),
            },
        )
        return None if claimed is None else _handoff(claimed)

    def finish_attempt(
        self,
        handoff_id: str,
        *,
        state: HandoffState,
        delivered_to: tuple[str, ...],
        error: str,
    ) -> None:
        self._update(
            handoff_id,
            UpdateExpression="SET #state = :state, #delivered = :delivered, #error = :error, "
            "#lease = :zero",
            ConditionExpression="attribute_exists(#state)",
            ExpressionAttributeNames={
                "#state": "state",
                "#delivered": "delivered_to",
                "#error": "last_error",
                "#lease": "lease_until",
            },
            ExpressionAttributeValues={
                ":state": {"S": state},
                ":delivered": {"S": json.dumps(list(delivered_to))},
                ":error": {"S": error},
                ":zero": _n(0),
            },
        )

    def handoffs_on(self, day: str, *, now: float) -> list[Handoff]:
        request: dict[str, Any] = {
            "TableName": self._table,
            "IndexName": INDEX,
            "KeyConditionExpression": "#day = :day",
            "ExpressionAttributeNames": {"#day": INDEX_PARTITION},
            "ExpressionAttributeValues": {":day": {"S": day_partition(day)}},
        }
        found: list[Handoff] = []
        while True:
            try:
                page = self._client.query(**request)
            except (ClientError, BotoCoreError) as error:
                raise StateStoreError(f"DynamoDB Query failed: {_reason(error)}") from error
            found.extend(h for h in map(_handoff, page.get("Items", [])) if h.expires_at > now)
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return sorted(found, key=lambda h: (h.created_at, h.id))


def _reason(error: ClientError | BotoCoreError) -> str:
    if isinstance(error, ClientError):
        return str(error.response.get("Error", {}).get("Code", "unknown"))
    return f"{type(error).__name__}: {error}"
