"""The sync's records (candor.sync.records) in the DynamoDB state table.

Every key starts with `sync#`, so the sync function's grant is one LeadingKeys
pattern and reaches nothing else in the table (sessions, ledgers, traces):

    pk                                 sk                       attributes
    sync#<index>                       site#<sha256(site)>      site, pages, last_sync,
                                                                summary (JSON), holder,
                                                                lease_until, cursor_id,
                                                                cursor_parts
    sync#<index>#<sha256(site)>        page#<sha256(url)>       url, body (the record, JSON)
    sync#<index>#<sha256(site)>        cursor#<id>#<n>          part (binary)

URLs and sites are hashed because a key holds at most 1024 (sort) or 2048
(partition) bytes and a URL may be longer; each item keeps its own in full.

A site's pages are one partition, read with Query (paginated, consistent). The
cursor of a sync in progress may be larger than an item (400 KB), so it is
written as parts under an id of their own first, and then the site item is
pointed at that id with one UpdateItem conditioned on the caller's lease: a
holder that lost its lease can write parts, but never make them the cursor.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from candor.backends.dynamodb_table import DynamoDBTable, failed
from candor.errors import StateStoreError
from candor.sync.records import PageRecord, SiteRecord

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

PREFIX = "sync#"
# Below DynamoDB's 400 KB per item, with room for the keys.
PART_BYTES = 350 * 1024
_LEASE_NAMES = {"#holder": "holder", "#until": "lease_until"}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _key(pk: str, sk: str) -> dict[str, AttributeValueTypeDef]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


def _sites_pk(index_name: str) -> str:
    return f"{PREFIX}{index_name}"


def _site_key(index_name: str, site: str) -> dict[str, AttributeValueTypeDef]:
    return _key(_sites_pk(index_name), f"site#{_digest(site)}")


def _pages_pk(index_name: str, site: str) -> str:
    return f"{PREFIX}{index_name}#{_digest(site)}"


class DynamoDBSyncStore(DynamoDBTable):
    def pages(self, index_name: str, site: str) -> list[PageRecord]:
        items = self._query(_pages_pk(index_name, site), "page#")
        return sorted(
            (PageRecord.from_json(json.loads(item["body"]["S"])) for item in items),
            key=lambda record: record.url,
        )

    def put_pages(self, index_name: str, site: str, records: Sequence[PageRecord]) -> None:
        pk = _pages_pk(index_name, site)
        for record in records:
            item: dict[str, AttributeValueTypeDef] = {
                **_key(pk, f"page#{_digest(record.url)}"),
                "url": {"S": record.url},
                "body": {"S": json.dumps(record.to_json())},
            }
            self._call("PutItem", self._client.put_item, TableName=self._table, Item=item)

    def delete_pages(self, index_name: str, site: str, urls: Sequence[str]) -> None:
        pk = _pages_pk(index_name, site)
        for url in urls:
            key = _key(pk, f"page#{_digest(url)}")
            self._call("DeleteItem", self._client.delete_item, TableName=self._table, Key=key)

    # Sites.

    def site(self, index_name: str, site: str) -> SiteRecord | None:
        item = self._get(_site_key(index_name, site))
        return None if item is None or "site" not in item else _site(item)

    def sites(self, index_name: str) -> list[SiteRecord]:
        items = self._query(_sites_pk(index_name), "site#")
        return sorted((_site(item) for item in items if "site" in item), key=lambda s: s.site)

    def put_site(self, index_name: str, record: SiteRecord) -> None:
        values: dict[str, AttributeValueTypeDef] = {
            ":site": {"S": record.site},
            ":pages": {"N": str(record.pages)},
            ":summary": {"S": json.dumps(record.summary)},
        }
        names = {"#site": "site", "#pages": "pages", "#summary": "summary"}
        expression = "SET #site = :site, #pages = :pages, #summary = :summary"
        if record.last_sync is not None:
            values[":last"] = {"N": str(Decimal(str(record.last_sync)))}
            names["#last"] = "last_sync"
            expression += ", #last = :last"
        self._call(
            "UpdateItem",
            self._client.update_item,
            TableName=self._table,
            Key=_site_key(index_name, record.site),
            UpdateExpression=expression,
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
        )

    # The sync in progress.

    def lease(self, index_name: str, site: str, holder: str, *, until: float, now: float) -> bool:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_site_key(index_name, site),
                UpdateExpression="SET #holder = :holder, #until = :until, #site = :site",
                ConditionExpression=(
                    "attribute_not_exists(#holder) OR #holder = :holder OR #until <= :now"
                ),
                ExpressionAttributeNames=_LEASE_NAMES | {"#site": "site"},
                ExpressionAttributeValues={
                    ":holder": {"S": holder},
                    ":until": {"N": str(Decimal(str(until)))},
                    ":now": {"N": str(Decimal(str(now)))},
                    ":site": {"S": site},
                },
            )
        except self._conflict:
            return False
        except (ClientError, BotoCoreError) as error:
            raise failed("UpdateItem", error) from error
        return True

    def release(self, index_name: str, site: str, holder: str) -> None:
        try:
            self._client.update_item(
                TableName=self._table,
                Key=_site_key(index_name, site),
                UpdateExpression="REMOVE #holder, #until",
                ConditionExpression="#holder = :holder",
                ExpressionAttributeNames=_LEASE_NAMES,
                ExpressionAttributeValues={":holder": {"S": holder}},
            )
        except self._conflict:
            return
        except (ClientError, BotoCoreError) as error:
            raise failed("UpdateItem", error) from error

    def cursor(self, index_name: str, site: str) -> bytes | None:
        item = self._get(_site_key(index_name, site))
        if item is None or "cursor_id" not in item:
            return None
        cursor_id = item["cursor_id"]["S"]
        count = int(item["cursor_parts"]["N"])
        pk = _pages_pk(index_name, site)
        parts = []
        for n in range(count):
            part = self._get(_key(pk, f"cursor#{cursor_id}#{n}"))
            if part is None:
                raise StateStoreError(f"sync cursor of {site} lacks part {n} of {count}")
            parts.append(bytes(part["part"]["B"]))
        return b"".join(parts)

    def save_cursor(self, index_name: str, site: str, holder: str, cursor: bytes | None) -> bool:
        pk = _pages_pk(index_name, site)
        key = _site_key(index_name, site)
        if cursor is None:
            expression = "REMOVE #id, #parts"
            values: dict[str, AttributeValueTypeDef] = {":holder": {"S": holder}}
            cursor_id = ""
        else:
            cursor_id = uuid.uuid4().hex
            pieces = [cursor[i : i + PART_BYTES] for i in range(0, len(cursor), PART_BYTES)]
            for n, piece in enumerate(pieces or [b""]):
                self._call(
                    "PutItem",
                    self._client.put_item,
                    TableName=self._table,
                    Item={**_key(pk, f"cursor#{cursor_id}#{n}"), "part": {"B": piece}},
                )
            expression = "SET #id = :id, #parts = :parts"
            values = {
                ":holder": {"S": holder},
                ":id": {"S": cursor_id},
                ":parts": {"N": str(max(1, len(pieces)))},
            }
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=expression,
                ConditionExpression="#holder = :holder",
                ExpressionAttributeNames={
                    "#holder": "holder",
                    "#id": "cursor_id",
                    "#parts": "cursor_parts",
                },
                ExpressionAttributeValues=values,
                ReturnValues="UPDATED_OLD",
            )
        except self._conflict:
            if cursor_id:
                self._drop_parts(pk, cursor_id)
            return False
        except (ClientError, BotoCoreError) as error:
            raise failed("UpdateItem", error) from error
        old = response.get("Attributes", {})
        if "cursor_id" in old:
            self._drop_parts(pk, old["cursor_id"]["S"])
        return True

    def _drop_parts(self, pk: str, cursor_id: str) -> None:
        for item in self._query(pk, f"cursor#{cursor_id}#"):
            key = {"pk": item["pk"], "sk": item["sk"]}
            self._call("DeleteItem", self._client.delete_item, TableName=self._table, Key=key)

    # The calls everything above is made of.


def _site(item: dict[str, Any]) -> SiteRecord:
    last = item.get("last_sync")
    return SiteRecord(
        site=str(item["site"]["S"]),
        pages=int(item.get("pages", {"N": "0"})["N"]),
        last_sync=float(last["N"]) if last is not None else None,
        summary=json.loads(item.get("summary", {"S": "{}"})["S"]),
    )
