"""Session ids the server owns: issued here, signed with HMAC-SHA256, checked on every use.

An id is `<nonce>.<issued at>.<mac>`: 128 random bits, the Unix time it was issued,
and the HMAC of both under the server's key. A client cannot pick an id, so it
cannot take over another visitor's session (end it with two insults, steer its
"tell me more"); it can only present an id the server gave it, until it expires.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time

from candor import secrets as keys
from candor.errors import ConfigurationError, SessionInvalidError
from candor.settings import Settings

# Ids from a clock a little ahead of ours are accepted, not ones from the future.
CLOCK_SKEW_SECONDS = 300
MIN_SECRET_CHARS = 16
SECRET_FILE = keys.SESSION_SECRET_FILE


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class SessionSigner:
    def __init__(self, secret: str, *, max_age_seconds: int) -> None:
        if len(secret) < MIN_SECRET_CHARS:
            raise ConfigurationError(
                f"the session secret must have at least {MIN_SECRET_CHARS} characters"
            )
        self._key = secret.encode()
        self.max_age_seconds = max_age_seconds

    def issue(self, *, now: float | None = None) -> str:
        body = f"{_b64(secrets.token_bytes(16))}.{int(time.time() if now is None else now)}"
        return f"{body}.{self._mac(body)}"

    def verify(self, session_id: str, *, now: float | None = None) -> str:
        """The id itself when the server signed it and it has not expired."""
        body, _, mac = session_id.rpartition(".")
        _, _, issued = body.partition(".")
        if not body or not hmac.compare_digest(mac, self._mac(body)):
            raise SessionInvalidError("the session id is not one this server signed")
        age = (time.time() if now is None else now) - int(issued)
        if age > self.max_age_seconds or age < -CLOCK_SKEW_SECONDS:
            raise SessionInvalidError("the session id has expired")
        return session_id

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())


def signer_for(settings: Settings) -> SessionSigner:
    """The signer keyed by CANDOR_SESSION_SECRET, its SSM parameter, or a key in the data folder."""
    secret = keys.session_secret(settings)
    return SessionSigner(secret, max_age_seconds=settings.session_max_age_seconds)
