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
from typing import TYPE_CHECKING

from candor.backends.dynamodb_table import DynamoDBTable

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef, QueryInputTypeDef


def partition(index_name: str) -> str:
    return f"catalogue#{index_name}"


def _key(index_name: str, source: str) -> dict[str, AttributeValueTypeDef]:
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    return {"pk": {"S": partition(index_name)}, "sk": {"S": f"doc#{digest}"}}


class DynamoDBCatalogueStore(DynamoDBTable):
    def catalogue_stamp(self, index_name: str, source: str) -> str | None:
        response = self._call(
            "GetItem",
            self._client.get_item,
            TableName=self._table,
            Key=_key(index_name, source),
            ConsistentRead=True,
            ProjectionExpression="#stamp",
            ExpressionAttributeNames={"#stamp": "stamp"},
        )
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
        # Not the base's _query: a deleted document's item (no body) is filtered out
        # by DynamoDB, and its bodies are all that is read.
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
            page = self._call("Query", self._client.query, **request)
            bodies.extend(bytes(item["body"]["B"]) for item in page.get("Items", []))
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
        self._call(
            "UpdateItem",
            self._client.update_item,
            TableName=self._table,
            Key=key,
            UpdateExpression=expression,
            ExpressionAttributeNames=used,
            ExpressionAttributeValues=values,
        )
