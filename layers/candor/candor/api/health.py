"""Health: a terse public answer, cached, and the details for the operator's terminal.

GET /health is unauthenticated, so it says only `ok` or `degraded` per dependency
and checks at most once every CACHE_SECONDS per process: a describe_index_stats
and a GetItem per hit would let anyone run up calls. `candor health` prints the
details, exception text included, to whoever runs it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from candor.deps import Deps
from candor.ports import StateStore, VectorIndex
from candor.settings import Settings

logger = logging.getLogger("candor.api")

CACHE_SECONDS = 30.0
DEPENDENCIES = ("index", "state", "embedder", "chat")


@dataclass(frozen=True, slots=True)
class Check:
    ok: bool
    backend: str
    detail: str = ""


def _failed(backend: str, error: Exception) -> Check:
    return Check(False, backend, f"{type(error).__name__}: {error}")


def index_check(index: VectorIndex, backend: str) -> Check:
    try:
        chunks = index.count()
    except Exception as error:  # health must report, not raise
        return _failed(backend, error)
    return Check(
        chunks > 0, backend, f"{chunks} chunks" if chunks else "empty: run `candor ingest`"
    )


def state_check(state: StateStore, backend: str) -> Check:
    try:
        state.get_session("health-check")
    except Exception as error:
        return _failed(backend, error)
    return Check(True, backend)


def check(deps: Deps) -> dict[str, Check]:
    """Each dependency, with cheap calls only: a count, a read, no model call."""
    settings = deps.settings
    return {
        "index": index_check(deps.index, settings.index_backend),
        "state": state_check(deps.state, settings.state_backend),
        "embedder": Check(
            True,
            settings.embedder_backend,
            f"{deps.embedder.name}, {deps.embedder.dimensions} dims",
        ),
        "chat": Check(True, settings.chat_backend, deps.chat.name),
    }


def diagnose(settings: Settings) -> dict[str, Check]:
    """What `candor health` prints: each dependency built and checked on its own."""
    from candor import factory

    checks: dict[str, Check] = {}
    try:
        embedder = factory.build_embedder(settings)
        checks["embedder"] = Check(
            True, settings.embedder_backend, f"{embedder.name}, {embedder.dimensions} dims"
        )
    except Exception as error:
        checks["embedder"] = _failed(settings.embedder_backend, error)
        checks["index"] = Check(False, settings.index_backend, "not checked: no embedder")
    else:
        try:
            index = factory.build_index(settings, embedder)
        except Exception as error:
            checks["index"] = _failed(settings.index_backend, error)
        else:
            checks["index"] = index_check(index, settings.index_backend)
    try:
        state = factory.build_state(settings)
    except Exception as error:
        checks["state"] = _failed(settings.state_backend, error)
    else:
        checks["state"] = state_check(state, settings.state_backend)
    try:
        chat = factory.build_chat(settings)
        checks["chat"] = Check(True, settings.chat_backend, chat.name)
    except Exception as error:
        checks["chat"] = _failed(settings.chat_backend, error)
    return {name: checks[name] for name in DEPENDENCIES}


class HealthCache:
    """The terse result, recomputed at most once every `seconds` (one check at a time)."""

    def __init__(
        self, seconds: float = CACHE_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.seconds = seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._result: dict[str, bool] | None = None
        self._at = 0.0

    def get(self, deps_provider: Callable[[], Deps]) -> dict[str, bool]:
        with self._lock:
            now = self._clock()
            if self._result is None or now - self._at >= self.seconds:
                self._result = self._compute(deps_provider)
                self._at = now
            return self._result

    @staticmethod
    def _compute(deps_provider: Callable[[], Deps]) -> dict[str, bool]:
        try:
            checks = check(deps_provider())
        except Exception as error:
            logger.error(
                "health: the dependencies cannot be built: %s: %s", type(error).__name__, error
            )
            return dict.fromkeys(DEPENDENCIES, False)
        for name, result in checks.items():
            if not result.ok:
                logger.warning("health: %s degraded: %s", name, result.detail)
        return {name: result.ok for name, result in checks.items()}
