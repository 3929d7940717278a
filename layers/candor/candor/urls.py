"""Public addresses of documents: what a citation links to.

A document's address comes from outside candor: the `x-amz-meta-url` metadata of
its S3 object (anyone who may upload sets it), or CANDOR_SOURCE_BASE_URL and the
document's path. The widget renders links to it, so only an absolute http(s)
address with a host is kept; anything else (`javascript:`, `data:`, a relative
path, a value with spaces or control characters) is dropped with a log line and
the citation shows its title and snippet instead.
"""

from __future__ import annotations

import logging
from urllib.parse import quote, urlsplit

logger = logging.getLogger(__name__)

# Far above real addresses, far below Pinecone's 40 KB of metadata per vector.
MAX_URL_CHARS = 2048
_SCHEMES = frozenset({"http", "https"})


def is_public_url(value: str) -> bool:
    """True for an absolute http(s) address with a host and nothing a browser would
    read differently from what is shown (whitespace, control characters)."""
    if not value or len(value) > MAX_URL_CHARS:
        return False
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return False
    try:
        parts = urlsplit(value)
        return parts.scheme.lower() in _SCHEMES and bool(parts.hostname)
    except ValueError:  # "http://[::1" and the like
        return False


def public_url(value: str | None, *, source: str) -> str | None:
    """`value` if it is a public address, else None (logged when it was given)."""
    if value is None or not value.strip():
        return None
    if is_public_url(value.strip()):
        return value.strip()
    # The value is untrusted: logged by repr and cut short, so it cannot forge log lines.
    logger.warning("%s: url %r is not an http(s) address; dropped", source, value[:200])
    return None


def source_url(base: str, source: str) -> str:
    """The address of `source` (a path with "/") under `base`: each path segment
    URL-quoted, the slashes kept, with one "/" between base and path."""
    return f"{base.rstrip('/')}/{quote(source.lstrip('/'), safe='/')}"
