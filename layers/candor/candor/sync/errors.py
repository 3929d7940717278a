"""The base of a site sync's own exceptions.

Not a CandorError: those are what the HTTP API maps to responses
(candor.api.errors), and the API never syncs. The command line and the sync
function handle these where they call the sync.
"""

from __future__ import annotations


class SyncError(Exception):
    """Something a site sync refused or could not do; the message says what."""
