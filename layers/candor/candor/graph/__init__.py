"""The agent graph: moderate -> route -> retrieve -> grade -> rewrite -> generate."""
