"""Calling the API as a browser on the configured site would: its Origin, JSON, a signed session."""

from __future__ import annotations

import dataclasses

from fastapi import FastAPI
from fastapi.testclient import TestClient

from candor.deps import Deps

ORIGIN = "https://docs.example.com"  # the origin of events/ask.json
SESSION_SECRET = "test-session-secret-0123456789abcdef"
SERVER_KEY = "server-key-0123456789"


def allowing(deps: Deps, **settings: object) -> Deps:
    """`deps` whose settings allow ORIGIN, accept SERVER_KEY and sign with SESSION_SECRET."""
    update: dict[str, object] = {
        "allowed_origins": (ORIGIN,),
        "api_keys": SERVER_KEY,
        "session_secret": SESSION_SECRET,
        **settings,
    }
    validated = type(deps.settings).model_validate(deps.settings.model_dump() | update)
    return dataclasses.replace(deps, settings=validated)


def browser(app: FastAPI) -> TestClient:
    """A client that sends ORIGIN on every request, as the site's pages do."""
    return TestClient(app, headers={"Origin": ORIGIN})
