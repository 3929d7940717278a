"""Gaps: questions the documents miss, kept in the state store until the documents answer them.

- records: a gap, its questions and checks, and the small store Protocol
  (backends/sqlite_gaps.py, backends/dynamodb_gaps.py);
- opening: gaps from the traces (declined, or rated down with a reason);
- checking: `candor gaps check`, on the owner's own budget;
- export: the open gaps as a question set for `candor eval`.
"""
