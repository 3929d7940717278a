"""The key that makes the caches' digests of a question unguessable when questions are not stored.

The answer cache and the verdict cache keep their records under a digest of the
normalised question (candor.guards.normalise). With CANDOR_STORE_QUESTIONS=true
the question is in its trace anyway, and the digest is a plain SHA-256. With it
false, no record may tell what was asked; but a plain digest can be confirmed by
anyone who guesses a question and can read the table (or a restored backup of
it), since the code names everything else that goes into it. So the digest is an
HMAC-SHA256 under a key derived from the deployment's secret (the session key,
candor.secrets.session_secret): without it a guess cannot be checked. Rotating
the secret empties both caches, which costs only the repeats.
"""

from __future__ import annotations

import hashlib
import hmac
from functools import lru_cache

from candor import secrets
from candor.settings import Settings

# Keeps the caches' key apart from the session signatures made with the same secret.
_PURPOSE = b"candor question digests v1"


def key_for(settings: Settings) -> bytes | None:
    """The HMAC key for question digests, or None when questions are stored (plain digests).

    Blocking on its first call in a process on AWS (one SSM read, then kept).
    """
    if settings.store_questions:
        return None
    return _derived(secrets.session_secret(settings))


@lru_cache(maxsize=4)
def _derived(secret: str) -> bytes:
    return hmac.new(secret.encode(), _PURPOSE, hashlib.sha256).digest()


def digest(text: str, key: bytes | None) -> str:
    """The hex digest of `text`: HMAC-SHA256 under `key`, or SHA-256 without one."""
    data = text.encode("utf-8", "surrogatepass")
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(key, data, hashlib.sha256).hexdigest()
