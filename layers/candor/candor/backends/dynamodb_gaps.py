"""Gaps in the production state table (candor.gaps.records).

Items of their own, under one partition per index (listing them is one Query):

    pk                   sk            attributes
    gaps#<index name>    gap#<id>      body (JSON), version, status, opened_at

A save is one UpdateItem conditioned on the version read (or on the item's absence
for a new gap). Only the owner's commands and the optional check after an ingest
(infra/template.yaml, GapsCheckFunction) touch them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from candor.backends.dynamodb_table import DynamoDBTable, failed
from candor.gaps.records import Gap

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef


def _pk(index_name: str) -> str:
    return f"gaps#{index_name}"


def _key(index_name: str, gap_id: str) -> dict[str, AttributeValueTypeDef]:
    return {"pk": {"S": _pk(index_name)}, "sk": {"S": f"gap#{gap_id}"}}


class DynamoDBGaps(DynamoDBTable):
    def list_gaps(self, index_name: str) -> list[Gap]:
        found = [Gap.from_json(str(item["body"]["S"])) for item in self._query(_pk(index_name))]
        return sorted(found, key=lambda g: (g.opened_at, g.id))

    def get_gap(self, index_name: str, gap_id: str) -> Gap | None:
        item = self._get(_key(index_name, gap_id))
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
            raise failed("UpdateItem", error) from error
        return True
