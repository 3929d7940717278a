"""A sync's options and records store, from the settings (as candor.factory builds ports)."""

from __future__ import annotations

from candor import __version__
from candor.errors import ConfigurationError
from candor.settings import Settings
from candor.sync.engine import SyncOptions
from candor.sync.records import SyncStore


def user_agent(settings: Settings) -> str:
    """`candor/0.2.0 (+https://contact)`: the token robots.txt names, and who to ask."""
    agent = f"{settings.sync_user_agent}/{__version__}"
    if settings.sync_contact_url:
        agent += f" (+{settings.sync_contact_url})"
    return agent


def options_from(settings: Settings, *, accept_removals: bool = False) -> SyncOptions:
    return SyncOptions(
        user_agent=user_agent(settings),
        token=settings.sync_user_agent,
        delay_seconds=settings.sync_delay_seconds,
        concurrency=settings.sync_concurrency,
        timeout_seconds=settings.sync_timeout_seconds,
        max_pages=settings.sync_max_pages,
        max_page_bytes=min(settings.sync_max_page_bytes, settings.ingest_max_bytes),
        max_total_bytes=settings.sync_max_total_bytes,
        max_seconds=float(settings.sync_max_seconds),
        grace=settings.sync_grace,
        max_removal_share=settings.sync_max_removal_share,
        hosts=settings.sync_hosts,
        accept_removals=accept_removals,
    )


def build_sync_store(settings: Settings) -> SyncStore:
    """The sync's records where the state store keeps its own (a file, or the table)."""
    match settings.state_backend:
        case "sqlite":
            from candor.backends.sqlite_sync import SqliteSyncStore

            return SqliteSyncStore(settings.state_path)
        case "dynamodb":
            from candor.backends.dynamodb_sync import DynamoDBSyncStore

            if not settings.state_table:
                raise ConfigurationError("CANDOR_STATE_TABLE must name the DynamoDB table")
            return DynamoDBSyncStore(
                settings.state_table,
                endpoint_url=settings.dynamodb_endpoint_url,
                region=settings.aws_region,
            )
        case other:
            raise ConfigurationError(f"state backend {other!r} is not available yet")
