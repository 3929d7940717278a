"""The document catalogue: what each document is, kept beside its chunks.

A question about the documents themselves ("what do your docs cover?", "list every
setting", "the options of git push") is not answered by any one passage: it is a
fact about the whole corpus, and a list a model assembles from five retrieved
passages is a list with holes. So at ingest each document's title, address,
headings (with their levels), the terms of its definition lists and the first
column of its tables (each with the section it belongs to), its size and when it
last changed are recorded (candor.catalogue.records, .extract), in the state
store beside the completion records (candor.ports.CatalogueStore; SQLite locally,
DynamoDB on AWS). The graph's catalogue node answers such questions from a few
parameterised functions over it (candor.catalogue.functions), with no model call.
"""
