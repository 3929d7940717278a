"""candor: retrieval-augmented chat that cites its sources or declines honestly."""

__version__ = "0.1.0"
