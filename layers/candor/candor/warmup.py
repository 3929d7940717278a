"""Warm start: what the first question would pay for, done when the process starts.

A cold process builds its dependencies (keys read, stores opened, the embedding
model loaded), and on the embedded default its first question also loads the
chat model's weights and evaluates each fixed system prompt, then meets the
index's vectors for the first time. `Warmup` does all of it once, in a
background thread: `candor serve` starts it at start, and on Lambda the Web
Adapter's readiness check (GET /health, which starts it too) holds the
function's init until it is done, so no visitor's question pays for it.

Nothing here spends money: on a cloud backend only the cheap checks run (a count,
a read); the embedding and the search run on the embedded backends alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Literal

from candor.deps import Deps
from candor.graph import prompts
from candor.ports import Preloadable

logger = logging.getLogger("candor.warmup")

WarmupStatus = Literal["cold", "warming", "ready", "failed"]
# Backends whose calls cost nothing: the warm-up may embed and search with them.
_FREE_EMBEDDERS = frozenset({"local", "hashing"})
_FREE_INDEXES = frozenset({"sqlite"})


def warm(deps: Deps) -> dict[str, float]:
    """Touch every dependency the way a first question would; the seconds of each step."""
    settings = deps.settings
    steps: dict[str, float] = {}

    def step(name: str, run: Callable[[], object]) -> None:
        started = time.perf_counter()
        run()
        steps[name] = round(time.perf_counter() - started, 3)

    step("state", lambda: deps.state.get_session("warm-up"))
    step("index", deps.index.count)
    if settings.cache_enabled:
        from candor import release

        # The answer cache keys on this digest: without it here, the first
        # cacheable question would read the package's files.
        step("code", release.code_digest)
    if settings.embedder_backend in _FREE_EMBEDDERS and settings.index_backend in _FREE_INDEXES:
        from candor import retrieval

        step(
            "retrieval",
            lambda: retrieval.configured_search(
                "warm up",
                settings,
                embedder=deps.embedder,
                index=deps.index,
                reranker=None,
                top_k=1,
            ),
        )
    if settings.screening:
        from candor.screening import classifier

        step("screening", classifier.shipped)
    chat = deps.chat
    if isinstance(chat, Preloadable):
        step("chat", lambda: chat.preload(prompts.fixed_systems(settings.site_name)))
    return steps


class Warmup:
    """One warm-up per process, run in a daemon thread; `status` says where it is.

    `deps_provider` is called in the thread (it builds and caches the dependencies).
    A failed warm-up is logged and leaves the process as it would be without one:
    the first request builds what it needs, and GET /health reports what is wrong.
    """

    def __init__(self, deps_provider: Callable[[], Deps]) -> None:
        self._deps_provider = deps_provider
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._status: WarmupStatus = "cold"
        self.steps: dict[str, float] = {}

    @property
    def status(self) -> WarmupStatus:
        return self._status

    def start(self) -> None:
        """Start warming unless it has started already (idempotent, returns at once)."""
        with self._lock:
            if self._status != "cold":
                return
            self._status = "warming"
        threading.Thread(target=self._run, name="candor-warmup", daemon=True).start()

    def wait(self, timeout: float | None = None) -> bool:
        """Whether the warm-up has finished (ready or failed) within `timeout` seconds."""
        return self._done.wait(timeout)

    def _run(self) -> None:
        started = time.perf_counter()
        try:
            deps = self._deps_provider()
            if deps.settings.warm_start:
                self.steps = warm(deps)
        except Exception as error:  # a warm-up must not take the server down
            logger.error("warm start failed: %s: %s", type(error).__name__, error)
            self._status = "failed"
        else:
            logger.info("warm start: ready in %.1f s %s", time.perf_counter() - started, self.steps)
            self._status = "ready"
        finally:
            self._done.set()
