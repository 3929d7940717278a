"""The production StateStore: one DynamoDB table, every guard one conditional write.

The table has a string partition key `pk`, a string sort key `sk` and a TTL
attribute `expires_at` (infra/template.yaml, StateTable). Items:

    pk                      sk               attributes
    session#<id>            session          offences, expires_at
    history#<id>            history          history (JSON), turns, expires_at
    rate#<key>              window#<start>   hits, expires_at (the end of the next window)
    budget#<ledger key>     ledger           spent, expires_at
    cache#<sha256>          answer           answer, expires_at
    verdict#<sha256>        verdict          verdict, expires_at
    corpus#<index name>     version          version
    trace#<trace id>        trace            session_id, created_at, body, feedback,
                                             day_shard, expires_at

The document catalogue (catalogue#<index name> items) shares the table; its own
module keeps it (candor.backends.dynamodb_catalogue).

Traces are read by day through the global secondary index `by_day` (partition
key `day_shard`, "<YYYY-MM-DD>#<n>"; sort key `created_at`), which only trace
items enter. A day is spread over TRACE_SHARDS partitions by the trace id, so
that one busy day cannot exceed one index partition's write rate; reading a day
is one Query per shard, never a Scan.

A session's follow-up history is an item of its own, so that it can expire long
before the session's status does (the caller sets its `expires_at`; see
candor.service.history_expires_at). Items written before it kept the turns in the
session item's `history`, which is no longer read and goes with that item.

DynamoDB deletes expired items up to days late, so reads check `expires_at`
themselves. The functions call only GetItem and UpdateItem: the template grants
exactly those. Only `traces_on` (the owner's `candor insights`, `export-dpo` and
`feedback review`, with the owner's credentials) calls Query.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
import zlib
from dataclasses import asdict
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from botocore.exceptions import BotoCoreError, ClientError

from candor.backends import rate_windows
from candor.backends.dynamodb_table import DynamoDBTable, error_code, failed
from candor.errors import StateStoreError
from candor.ports import (
    SESSION_LIFETIME_SECONDS,
    CacheKey,
    RateDecision,
    RatingOutcome,
    Session,
    SessionStatus,
    StoredTrace,
    Turn,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

STATUSES: tuple[SessionStatus, ...] = ("active", "warned", "ended")
SESSION_TTL_SECONDS = SESSION_LIFETIME_SECONDS
# append_turn is a read and a write conditioned on the turn counter it read. Each
# round at least one of the writers racing on a session wins, so this many
# rounds serve that many concurrent requests of one session.
APPEND_ATTEMPTS = 10
# The traces' index, as infra/template.yaml defines it (tests/unit/test_template.py
# checks that the two agree).
TRACE_INDEX = "by_day"
TRACE_INDEX_KEYS = ("day_shard", "created_at")
# Each index partition takes about 1,000 writes a second; four give a day four times
# that, far above what the ask function's reserved concurrency can write.
TRACE_SHARDS = 4


def day_shard(trace_id: str, day: str) -> str:
    return f"{day}#{zlib.crc32(trace_id.encode()) % TRACE_SHARDS}"


def _s(value: str) -> AttributeValueTypeDef:
    return {"S": value}


def _n(value: int | Decimal) -> AttributeValueTypeDef:
    return {"N": str(value)}


def _key(pk: str, sk: str) -> dict[str, AttributeValueTypeDef]:
    return {"pk": _s(pk), "sk": _s(sk)}


def _number(item: dict[str, Any], name: str) -> Decimal | None:
    value = item.get(name)
    return None if value is None else Decimal(value["N"])


class DynamoDBStateStore(DynamoDBTable):
    def __init__(
        self,
        table_name: str,
        *,
        client: DynamoDBClient | None = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        session_ttl_seconds: int = SESSION_TTL_SECONDS,
    ) -> None:
        super().__init__(table_name, client=client, endpoint_url=endpoint_url, region=region)
        self._session_ttl = session_ttl_seconds

    # Sessions and moderation.

    def get_session(self, session_id: str) -> Session:
        session = self._get(_key(f"session#{session_id}", "session"))
        offences = int(_number(session, "offences") or 0) if session else 0
        # _get ignores an expired item: history past its window is never read.
        stored = self._get(_key(f"history#{session_id}", "history"))
        turns = json.loads(stored["history"]["S"]) if stored and "history" in stored else []
        return Session(session_id, STATUSES[min(offences, 2)], [Turn(**turn) for turn in turns])

    def session_status(self, session_id: str) -> SessionStatus:
        # Only the session item: the feedback function, which asks this, has no grant
        # on history#... items.
        session = self._get(_key(f"session#{session_id}", "session"))
        return STATUSES[min(int(_number(session, "offences") or 0) if session else 0, 2)]

    def record_offence(self, session_id: str) -> SessionStatus:
        # A counter moves active -> warned -> ended in one write with no condition
        # to lose: two offences racing each count, and the status is read from the sum.
        now = time.time()
        attributes = self._update(
            _key(f"session#{session_id}", "session"),
            "ADD #offences :one SET #updated = :now, #expires = :expires",
            names={"#offences": "offences", "#updated": "updated_at", "#expires": "expires_at"},
            values={
                ":one": _n(1),
                ":now": _n(Decimal(str(round(now, 3)))),
                ":expires": _n(int(now) + self._session_ttl),
            },
        )
        assert attributes is not None
        return STATUSES[min(int(_number(attributes, "offences") or 0), 2)]

    def append_turn(self, session_id: str, turn: Turn, *, keep: int, expires_at: int) -> None:
        key = _key(f"history#{session_id}", "history")
        entry = asdict(turn)
        names = {
            "#history": "history",
            "#turns": "turns",
            "#updated": "updated_at",
            "#expires": "expires_at",
        }
        for attempt in range(APPEND_ATTEMPTS):
            now = time.time()
            item = self._get(key, include_expired=True) or {}
            seen = _number(item, "turns")
            expires = _number(item, "expires_at")
            live = expires is None or expires > Decimal(str(now))
            history = json.loads(item["history"]["S"]) if live and "history" in item else []
            history = [*history, entry][-keep:] if keep else []
            values = {
                ":history": _s(json.dumps(history)),
                ":next": _n(int(seen or 0) + 1),
                ":now": _n(Decimal(str(round(now, 3)))),
                ":expires": _n(expires_at),
            }
            if seen is None:
                condition = "attribute_not_exists(#turns)"
            else:
                condition = "#turns = :seen"
                values[":seen"] = _n(seen)
            update = "SET #history = :history, #turns = :next, #updated = :now, #expires = :expires"
            if self._update_if(key, update, condition, names=names, values=values):
                return
            time.sleep(random.uniform(0, 0.005 * (attempt + 1)))
        raise StateStoreError(f"session {session_id}: history stayed contended")

    # Rate limits.

    def hit_rate_limit(
        self, key: str, *, window_seconds: int, limit: int, now: float
    ) -> RateDecision:
        w = rate_windows.windows(window_seconds, now)
        # The previous window is closed: no request writes to it any more, so its
        # hits read here stay true while the conditional write below decides.
        previous = self._hits(key, w.previous_start)
        cap = rate_windows.allowance(limit, previous, w)
        current: int | None = None
        if cap > 0:
            try:
                self._client.update_item(
                    TableName=self._table,
                    Key=_key(f"rate#{key}", f"window#{w.start}"),
                    UpdateExpression="ADD #hits :one SET #expires = :expires",
                    ConditionExpression="attribute_not_exists(#hits) OR #hits < :cap",
                    ExpressionAttributeNames={"#hits": "hits", "#expires": "expires_at"},
                    ExpressionAttributeValues={
                        ":one": _n(1),
                        ":expires": _n(w.expires_at),
                        ":cap": _n(cap),
                    },
                    # A refusal carries the hits that refused it, for its Retry-After.
                    ReturnValuesOnConditionCheckFailure="ALL_OLD",
                )
            except self._conflict as refused:
                item: dict[str, Any] = refused.response.get("Item") or {}  # type: ignore[assignment]
                hits = _number(item, "hits")
                current = int(hits) if hits is not None else self._hits(key, w.start)
            except (ClientError, BotoCoreError) as error:
                raise failed("UpdateItem", error) from error
        else:
            current = self._hits(key, w.start)
        if current is None:
            return RateDecision(True)
        return RateDecision(False, rate_windows.retry_after(limit, previous, current, w))

    def _hits(self, key: str, window_start: int) -> int:
        # Expired or not: a window is read only while it is the current or the previous one.
        item = self._get(_key(f"rate#{key}", f"window#{window_start}"), include_expired=True)
        hits = None if item is None else _number(item, "hits")
        return 0 if hits is None else int(hits)

    # Spending.

    def reserve_budget(
        self, ledger_key: str, amount: Decimal, *, cap: Decimal, expires_at: int
    ) -> bool:
        if amount < 0:
            raise ValueError(f"a reservation cannot be negative: {amount}")
        # DynamoDB rejects arithmetic in a ConditionExpression (`spent + :a <= :cap`
        # is a ValidationException), so the subtraction happens here.
        limit = cap - amount
        if limit < 0:
            return False
        return self._update_if(
            _key(f"budget#{ledger_key}", "ledger"),
            "SET #spent = if_not_exists(#spent, :zero) + :amount, #expires = :expires",
            "attribute_not_exists(#spent) OR #spent <= :limit",
            names={"#spent": "spent", "#expires": "expires_at"},
            values={
                ":zero": _n(0),
                ":amount": _n(amount),
                ":expires": _n(expires_at),
                ":limit": _n(limit),
            },
        )

    def settle_budget(self, ledger_key: str, *, reserved: Decimal, actual: Decimal) -> None:
        delta = actual - reserved
        if delta == 0:
            return
        # Only a ledger that holds the reservation is trued up; the condition keeps
        # a stray settle from creating a negative ledger.
        self._update_if(
            _key(f"budget#{ledger_key}", "ledger"),
            "ADD #spent :delta",
            "attribute_exists(#spent)",
            names={"#spent": "spent"},
            values={":delta": _n(delta)},
        )

    def budget_spent(self, ledger_key: str) -> Decimal:
        item = self._get(_key(f"budget#{ledger_key}", "ledger"), include_expired=True)
        spent = None if item is None else _number(item, "spent")
        return Decimal(0) if spent is None else spent.normalize()

    # Answer cache and corpus versions.

    def cache_get(self, key: CacheKey, *, now: float) -> str | None:
        item = self._get(_key(f"cache#{key.digest}", "answer"), now=now)
        return None if item is None else str(item["answer"]["S"])

    def cache_put(self, key: CacheKey, value: str, *, expires_at: int) -> None:
        self._update(
            _key(f"cache#{key.digest}", "answer"),
            "SET #answer = :answer, #expires = :expires",
            names={"#answer": "answer", "#expires": "expires_at"},
            values={":answer": _s(value), ":expires": _n(expires_at)},
        )

    # Screening verdicts (candor.screening.verdicts).

    def verdict_get(self, digest: str, *, now: float) -> str | None:
        item = self._get(_key(f"verdict#{digest}", "verdict"), now=now)
        return None if item is None else str(item["verdict"]["S"])

    def verdict_put(self, digest: str, verdict: str, *, expires_at: int) -> None:
        self._update(
            _key(f"verdict#{digest}", "verdict"),
            "SET #verdict = :verdict, #expires = :expires",
            names={"#verdict": "verdict", "#expires": "expires_at"},
            values={":verdict": _s(verdict), ":expires": _n(expires_at)},
        )

    def corpus_version(self, index_name: str) -> int:
        item = self._get(_key(f"corpus#{index_name}", "version"))
        return 0 if item is None else int(_number(item, "version") or 0)

    def bump_corpus_version(self, index_name: str) -> int:
        attributes = self._update(
            _key(f"corpus#{index_name}", "version"),
            "ADD #version :one",
            names={"#version": "version"},
            values={":one": _n(1)},
        )
        assert attributes is not None
        return int(_number(attributes, "version") or 0)

    # Traces and feedback.

    def put_trace(self, trace: StoredTrace) -> None:
        self._update(
            _key(f"trace#{trace.trace_id}", "trace"),
            "SET #session = :session, #created = :created, #body = :body, "
            "#shard = :shard, #expires = :expires",
            names={
                "#session": "session_id",
                "#created": "created_at",
                "#body": "body",
                "#shard": TRACE_INDEX_KEYS[0],
                "#expires": "expires_at",
            },
            values={
                ":session": _s(trace.session_id),
                ":created": _n(Decimal(repr(trace.created_at))),
                ":body": _s(trace.body),
                ":shard": _s(day_shard(trace.trace_id, trace.day)),
                ":expires": _n(trace.expires_at),
            },
        )

    def get_trace(self, trace_id: str, *, now: float) -> StoredTrace | None:
        item = self._get(_key(f"trace#{trace_id}", "trace"), now=now)
        return None if item is None else _trace(item)

    def rate_trace(
        self, trace_id: str, session_id: str, feedback: str, *, now: float
    ) -> RatingOutcome:
        rated = self._update_if(
            _key(f"trace#{trace_id}", "trace"),
            "SET #feedback = :feedback",
            # A comparison with a missing attribute is false: no trace, no write.
            "#session = :session AND #expires > :now",
            names={"#feedback": "feedback", "#session": "session_id", "#expires": "expires_at"},
            values={
                ":feedback": _s(feedback),
                ":session": _s(session_id),
                ":now": _n(Decimal(str(round(now, 3)))),
            },
        )
        if rated:
            return "rated"
        return "forbidden" if self.get_trace(trace_id, now=now) else "unknown"

    def review_feedback(self, trace_id: str, seen: str, reviewed: str, *, now: float) -> bool:
        return self._update_if(
            _key(f"trace#{trace_id}", "trace"),
            "SET #feedback = :reviewed",
            "#feedback = :seen AND #expires > :now",
            names={"#feedback": "feedback", "#expires": "expires_at"},
            values={
                ":reviewed": _s(reviewed),
                ":seen": _s(seen),
                ":now": _n(Decimal(str(round(now, 3)))),
            },
        )

    def traces_on(self, day: str, *, now: float) -> list[StoredTrace]:
        traces: list[StoredTrace] = []
        for shard in range(TRACE_SHARDS):
            request: dict[str, Any] = {
                "TableName": self._table,
                "IndexName": TRACE_INDEX,
                "KeyConditionExpression": "#shard = :shard",
                "ExpressionAttributeNames": {"#shard": TRACE_INDEX_KEYS[0]},
                "ExpressionAttributeValues": {":shard": _s(f"{day}#{shard}")},
            }
            while True:
                try:
                    page = self._client.query(**request)
                except ClientError as error:
                    raise StateStoreError(f"DynamoDB Query failed: {error_code(error)}") from error
                for item in page.get("Items", []):
                    trace = _trace(item)
                    if trace.expires_at > now:
                        traces.append(trace)
                if "LastEvaluatedKey" not in page:
                    break
                request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return sorted(traces, key=lambda t: (t.created_at, t.trace_id))

    # The two calls everything above is made of.

    def _get(
        self,
        key: dict[str, AttributeValueTypeDef],
        *,
        now: float | None = None,
        include_expired: bool = False,
    ) -> dict[str, Any] | None:
        try:
            response = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True)
        except (ClientError, BotoCoreError) as error:
            raise failed("GetItem", error) from error
        item: dict[str, Any] | None = response.get("Item")
        if item is None or include_expired:
            return item
        expires = _number(item, "expires_at")
        if expires is not None and expires <= Decimal(str(time.time() if now is None else now)):
            return None
        return item

    def _update(
        self,
        key: dict[str, AttributeValueTypeDef],
        expression: str,
        *,
        names: dict[str, str],
        values: dict[str, AttributeValueTypeDef],
    ) -> dict[str, Any] | None:
        try:
            response = self._client.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=expression,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
                ReturnValues="UPDATED_NEW",
            )
        except (ClientError, BotoCoreError) as error:
            raise failed("UpdateItem", error) from error
        attributes: dict[str, Any] | None = response.get("Attributes")
        return attributes

    def _update_if(
        self,
        key: dict[str, AttributeValueTypeDef],
        expression: str,
        condition: str,
        *,
        names: dict[str, str],
        values: dict[str, AttributeValueTypeDef],
    ) -> bool:
        """One conditional write; False when the condition did not hold."""
        try:
            self._client.update_item(
                TableName=self._table,
                Key=key,
                UpdateExpression=expression,
                ConditionExpression=condition,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues=values,
            )
        except self._conflict:
            return False
        except (ClientError, BotoCoreError) as error:
            raise failed("UpdateItem", error) from error
        return True

    # Ingest completion records (candor.ingest.records), one item per document:
    #     pk ingest#<index name>#<sha256(source)>, sk record; attributes record, source.
    # The source is hashed because an S3 key may be 1024 bytes, a sort key no more;
    # it is kept beside the record for whoever reads the table.

    def ingest_record(self, index_name: str, source: str) -> str | None:
        item = self._get(_ingest_key(index_name, source))
        return None if item is None or "record" not in item else str(item["record"]["S"])

    def set_ingest_record(self, index_name: str, source: str, record: str | None) -> None:
        key = _ingest_key(index_name, source)
        if record is None:
            # UpdateItem rather than DeleteItem: the functions are granted only
            # GetItem and UpdateItem. An item without a record reads as none.
            self._update(
                key,
                "REMOVE #record SET #source = :source",
                names={"#record": "record", "#source": "source"},
                values={":source": _s(source)},
            )
            return
        self._update(
            key,
            "SET #record = :record, #source = :source",
            names={"#record": "record", "#source": "source"},
            values={":record": _s(record), ":source": _s(source)},
        )


def _ingest_key(index_name: str, source: str) -> dict[str, AttributeValueTypeDef]:
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    return _key(f"ingest#{index_name}#{digest}", "record")


def _trace(item: dict[str, Any]) -> StoredTrace:
    feedback = item.get("feedback")
    return StoredTrace(
        trace_id=str(item["pk"]["S"]).removeprefix("trace#"),
        session_id=str(item["session_id"]["S"]),
        created_at=float(item["created_at"]["N"]),
        expires_at=int(item["expires_at"]["N"]),
        body=str(item["body"]["S"]),
        feedback=None if feedback is None else str(feedback["S"]),
    )
