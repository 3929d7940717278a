"""Gaps in the production state table (candor.gaps.records).

Items of their own, under one partition per index (listing them is one Query):

    pk                   sk            attributes
    gaps#<index name>    gap#<id>      body (JSON), version, status, opened_at

A save is one UpdateItem conditioned on the version read (or on the item's absence
for a new gap). Only the owner's commands and the optional check after an ingest
(infra/template.yaml, GapsCheckFunction) touch them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from candor.errors import StateStoreError
from candor.gaps.records import Gap

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef


def _pk(index_name: str) -> str:
    return f"gaps#{index_name}"


def _key(index_name: str, gap_id: str) -> dict[str, AttributeValueTypeDef]:
    return {"pk": {"S": _pk(index_name)}, "sk": {"S": f"gap#{gap_id}"}}


def _failed(operation: str, error: ClientError | BotoCoreError) -> StateStoreError:
    if isinstance(error, ClientError):
        code = error.response.get("Error", {}).get("Code", "unknown")
        return StateStoreError(f"DynamoDB {operation} failed: {code}")
    return StateStoreError(f"DynamoDB {operation} failed: {type(error).__name__}: {error}")


class DynamoDBGaps:
    def __init__(
        self,
        table_name: str,
        *,
        client: DynamoDBClient | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
    ) -> None:
        if client is None:
            import boto3

            client = boto3.client("dynamodb", endpoint_url=endpoint_url, region_name=region)
        self._client = client
        self._table = table_name
        self._conflict = client.exceptions.ConditionalCheckFailedException

    def list_gaps(self, index_name: str) -> list[Gap]:
        found: list[Gap] = []
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": _pk(index_name)}},
            "ConsistentRead": True,
        }
        while True:
            try:
                page = self._client.query(**request)
            except (ClientError, BotoCoreError) as error:
                raise _failed("Query", error) from error
            found += [Gap.from_json(str(item["body"]["S"])) for item in page["Items"]]
            if "LastEvaluatedKey" not in page:
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return sorted(found, key=lambda g: (g.opened_at, g.id))

    def get_gap(self, index_name: str, gap_id: str) -> Gap | None:
        try:
            response = self._client.get_item(
                TableName=self._table, Key=_key(index_name, gap_id), ConsistentRead=True
            )
        except (ClientError, BotoCoreError) as error:
            raise _failed("GetItem", error) from error
        item = response.get("Item")
        return None if item is None else Gap.from_json(str(item["body"]["S"]))

    def save_gap(self, gap: Gap) -> bool:
        values: dict[str, AttributeValueTypeDef] = {
            ":body": {"S": gap.to_json()},
            ":version": {"N": str(gap.version)},
            ":status": {"S": gap.status},
            ":opened": {"N": repr(gap.opened_at)},
        }
        if gap.version == 1:
            condition = "attribute_not_exists(pk)"
        else:
            condition = "#version = :previous"
            values[":previous"] = {"N": str(gap.version - 1)}
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_key(gap.index_name, gap.id),
                UpdateExpression=(
                    "SET #body = :body, #version = :version, #status = :status, #opened = :opened"
                ),
                ConditionExpression=condition,
                ExpressionAttributeNames={
                    "#body": "body",
                    "#version": "version",
                    "#status": "status",
                    "#opened": "opened_at",
                },
                ExpressionAttributeValues=values,
            )
        except self._conflict:
            return False
        except (ClientError, BotoCoreError) as error:
            raise _failed("UpdateItem", error) from error
        return True
