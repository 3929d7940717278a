"""Answers the site owner writes (or approves from a visitor), served before retrieval.

- records: what one curated answer is, and the small store Protocol that keeps them
  (backends/sqlite_curated.py, backends/dynamodb_curated.py);
- matching: when a visitor's question asks what a curated question asks;
- library: add, list and remove, keeping the store and the curated index in step;
- lookup: the match as the graph and the service run it, metered and bounded.
"""
