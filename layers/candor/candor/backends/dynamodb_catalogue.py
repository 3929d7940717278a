"""The document catalogue on AWS: items in the state store's DynamoDB table.

One item per document, all of an index under one partition key, so that the
catalogue of an index is one Query (paged) and never a Scan:

    pk                      sk                      attributes
    catalogue#<index name>  doc#<sha256(source)>    stamp, body (binary), source

The source is hashed because an S3 key may be 1024 bytes, a sort key no more; it
is kept beside the record for whoever reads the table. A record is at most 300 KB
(candor.catalogue.records), under DynamoDB's 400 KB an item. A deleted document's
item loses its stamp and body (UpdateItem: the ingest function is granted no
DeleteItem) and is no longer read.

The ingest function writes with GetItem and UpdateItem on catalogue#* items; the
ask function reads with Query on them (infra/template.yaml grants exactly that).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from candor.errors import StateStoreError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef, QueryInputTypeDef


def partition(index_name: str) -> str:
    return f"catalogue#{index_name}"


def _key(index_name: str, source: str) -> dict[str, AttributeValueTypeDef]:
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    return {"pk": {"S": partition(index_name)}, "sk": {"S": f"doc#{digest}"}}


class DynamoDBCatalogueStore:
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

    def catalogue_stamp(self, index_name: str, source: str) -> str | None:
        try:
            response = self._client.get_item(
                TableName=self._table,
                Key=_key(index_name, source),
                ConsistentRead=True,
                ProjectionExpression="#stamp",
                ExpressionAttributeNames={"#stamp": "stamp"},
            )
        except (ClientError, BotoCoreError) as error:
            raise _failed("GetItem", error) from error
        stamp = response.get("Item", {}).get("stamp")
        return None if stamp is None else str(stamp["S"])

    def put_catalogue(self, index_name: str, source: str, stamp: str, body: bytes) -> None:
        self._update(
            _key(index_name, source),
            "SET #stamp = :stamp, #body = :body, #source = :source",
            {":stamp": {"S": stamp}, ":body": {"B": body}, ":source": {"S": source}},
        )

    def delete_catalogue(self, index_name: str, source: str) -> None:
        self._update(
            _key(index_name, source),
            "REMOVE #stamp, #body SET #source = :source",
            {":source": {"S": source}},
        )

    def catalogue(self, index_name: str) -> list[bytes]:
        request: QueryInputTypeDef = {
            "TableName": self._table,
            "KeyConditionExpression": "pk = :pk",
            "FilterExpression": "attribute_exists(#body)",
            "ExpressionAttributeNames": {"#body": "body"},
            "ExpressionAttributeValues": {":pk": {"S": partition(index_name)}},
            "ConsistentRead": True,
        }
        bodies: list[bytes] = []
        while True:
            try:
                page = self._client.query(**request)
            except (ClientError, BotoCoreError) as error:
                raise _failed("Query", error) from error
            items: list[dict[str, Any]] = page.get("Items", [])
            bodies.extend(bytes(item["body"]["B"]) for item in items)
            if "LastEvaluatedKey" not in page:
                return bodies
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _update(
        self,
        key: dict[str, AttributeValueTypeDef],
        expression: str,
        values: dict[str, AttributeValueTypeDef],
    ) -> None:
        names = {"#stamp": "stamp", "#body": "body", "#source": "source"}
        used = {name: value for name, value in names.items() if name in expression}
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=expression,
                ExpressionAttributeNames=used,
                ExpressionAttributeValues=values,
            )
        except (ClientError, BotoCoreError) as error:
            raise _failed("UpdateItem", error) from error


def _failed(operation: str, error: ClientError | BotoCoreError) -> StateStoreError:
    if isinstance(error, ClientError):
        code = str(error.response.get("Error", {}).get("Code", "unknown"))
        return StateStoreError(f"DynamoDB {operation} of the catalogue failed: {code}")
    return StateStoreError(
        f"DynamoDB {operation} of the catalogue failed: {type(error).__name__}: {error}"
    )
