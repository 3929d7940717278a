"""candor: retrieval-augmented chat that cites its sources or declines honestly."""

# Part of the answer cache's key (candor.guards.settings_fingerprint): a release
# that changes prompts or checks never serves an answer an older one cached.
__version__ = "0.2.0"
