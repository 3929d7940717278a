"""Curated answers in the production state table (candor.curated.records).

Items of their own in the StateTable (infra/template.yaml), under one partition per
index, so that listing them is one Query and nothing else's key can collide:

    pk                      sk               attributes
    curated#<index name>    answer#<id>      body (JSON), created_at
    curated#<index name>    state            generation, count

An add or a remove is one transaction of the answer's write (conditioned on its
absence, or its presence) and the state's ADD. The ask function only reads
(GetItem: the state, then a candidate); `candor answers` writes, with the owner's
credentials.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError

from candor.backends.dynamodb_table import DynamoDBTable, failed
from candor.curated.records import CuratedAnswer, CuratedState
from candor.errors import StateStoreError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef, TransactWriteItemTypeDef

STATE_SK = "state"


def _pk(index_name: str) -> str:
    return f"curated#{index_name}"


def _key(index_name: str, sk: str) -> dict[str, AttributeValueTypeDef]:
    return {"pk": {"S": _pk(index_name)}, "sk": {"S": sk}}


class DynamoDBCuratedAnswers(DynamoDBTable):
    def put_curated(self, index_name: str, answer: CuratedAnswer) -> CuratedState:
        put: TransactWriteItemTypeDef = {
            "Put": {
                "TableName": self._table,
                "Item": {
                    **_key(index_name, f"answer#{answer.id}"),
                    "body": {"S": answer.to_json()},
                    "created_at": {"N": repr(answer.created_at)},
                },
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }
        if not self._transact(put, self._move(index_name, 1)):
            raise StateStoreError(f"a curated answer {answer.id} exists already")
        return self.curated_state(index_name)

    def get_curated(self, index_name: str, answer_id: str) -> CuratedAnswer | None:
        item = self._get(_key(index_name, f"answer#{answer_id}"))
        return None if item is None else CuratedAnswer.from_json(str(item["body"]["S"]))

    def list_curated(self, index_name: str) -> list[CuratedAnswer]:
        found = [
            CuratedAnswer.from_json(str(item["body"]["S"]))
            for item in self._query(_pk(index_name), "answer#")
        ]
        return sorted(found, key=lambda a: (a.created_at, a.id))

    def remove_curated(self, index_name: str, answer_id: str) -> CuratedState | None:
        delete: TransactWriteItemTypeDef = {
            "Delete": {
                "TableName": self._table,
                "Key": _key(index_name, f"answer#{answer_id}"),
                "ConditionExpression": "attribute_exists(pk)",
            }
        }
        if not self._transact(delete, self._move(index_name, -1)):
            return None
        return self.curated_state(index_name)

    def curated_state(self, index_name: str) -> CuratedState:
        item = self._get(_key(index_name, STATE_SK))
        if item is None:
            return CuratedState()
        return CuratedState(int(item["generation"]["N"]), int(item["count"]["N"]))

    def _move(self, index_name: str, by: int) -> TransactWriteItemTypeDef:
        return {
            "Update": {
                "TableName": self._table,
                "Key": _key(index_name, STATE_SK),
                "UpdateExpression": "ADD #generation :one, #count :by SET #at = :now",
                "ExpressionAttributeNames": {
                    "#generation": "generation",
                    "#count": "count",
                    "#at": "updated_at",
                },
                "ExpressionAttributeValues": {
                    ":one": {"N": "1"},
                    ":by": {"N": str(by)},
                    ":now": {"N": repr(time.time())},
                },
            }
        }

    def _transact(self, *items: TransactWriteItemTypeDef) -> bool:
        """One transaction; False when the first item's condition did not hold."""
        try:
            self._client.transact_write_items(TransactItems=list(items))
        except ClientError as error:
            reasons = error.response.get("CancellationReasons", [])
            if reasons and reasons[0].get("Code") == "ConditionalCheckFailed":
                return False
            raise failed("TransactWriteItems", error) from error
        except BotoCoreError as error:
            raise failed("TransactWriteItems", error) from error
        return True
