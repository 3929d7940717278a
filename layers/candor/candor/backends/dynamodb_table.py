"""What every kind of record in the production state table shares: the client and its errors.

Sessions, guards and traces (DynamoDBStateStore), curated answers, gaps, hand-offs and
sync records keep items of their own in one table, told apart by their partition-key
prefix (infra/template.yaml scopes each function's grant by it). Each is a
`DynamoDBTable`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from candor.errors import StateStoreError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef


class DynamoDBTable:
    """The table's client (made here unless a test or caller passes one) and its calls."""

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

    def _call(self, operation: str, method: Callable[..., Any], **kwargs: Any) -> Any:
        """One call; DynamoDB's refusal or no answer at all becomes a StateStoreError."""
        try:
            return method(**kwargs)
        except (ClientError, BotoCoreError) as error:
            raise failed(operation, error) from error

    def _get(self, key: dict[str, AttributeValueTypeDef]) -> dict[str, Any] | None:
        """The item under `key` (a consistent read), or None."""
        response = self._call(
            "GetItem", self._client.get_item, TableName=self._table, Key=key, ConsistentRead=True
        )
        item: dict[str, Any] | None = response.get("Item")
        return item

    def _query(self, pk: str, sk_prefix: str = "") -> Iterator[dict[str, Any]]:
        """Every item of partition `pk` whose sort key starts with `sk_prefix`, page by page."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": {"S": pk}},
            "ConsistentRead": True,
        }
        if sk_prefix:  # DynamoDB refuses an empty string in a key condition
            request["KeyConditionExpression"] += " AND begins_with(sk, :prefix)"
            request["ExpressionAttributeValues"][":prefix"] = {"S": sk_prefix}
        while True:
            page = self._call("Query", self._client.query, **request)
            yield from page.get("Items", [])
            if "LastEvaluatedKey" not in page:
                return
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def failed(operation: str, error: ClientError | BotoCoreError) -> StateStoreError:
    """A call DynamoDB refused (its error code) or that got no answer (connection,
    timeout, credentials: the botocore error itself)."""
    if isinstance(error, ClientError):
        return StateStoreError(f"DynamoDB {operation} failed: {error_code(error)}")
    return StateStoreError(f"DynamoDB {operation} failed: {type(error).__name__}: {error}")


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", "unknown"))
