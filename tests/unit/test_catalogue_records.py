"""What the catalogue records of a document: headings, definition terms, table rows."""

from __future__ import annotations

import json
import os
import zlib

import pytest

from candor.catalogue.extract import record_of
from candor.catalogue.records import (
    MAX_ENTRIES,
    MAX_RECORD_BYTES,
    DocumentRecord,
    Entry,
    Heading,
    Stamp,
    decode,
    encode,
)
from candor.ingest.chunking import chunk_document
from candor.ingest.loaders import load_document

pytestmark = pytest.mark.unit

MARKDOWN = b"""# Configuration

Every setting is an environment variable.

## Retrieval

| variable | default | what it does |
|---|---|---|
| `CANDOR_TOP_K` | `6` | excerpts shown |
| `CANDOR_API_KEYS` / `CANDOR_API_KEYS_PARAMETER` | unset | server keys |
| **CANDOR_RRF_K** | `60` | the constant |

```
| not | a table |
|---|---|
| inside | code |
```

## Guards

Text only, no table.

### Rate limits

| variable | default |
| --- | --- |
| CANDOR_RATE_ADDRESS_LIMIT | 20 |
"""

HTML = b"""<html><head><title>git-push(1)</title></head><body>
<h1>git-push(1) Manual Page</h1>
<h2>OPTIONS</h2>
<dl>
<dt>--all</dt><dd>Push all branches.</dd>
<dt>-n</dt><dt>--dry-run</dt><dd>Do everything except send.
  <table><tr><td>inside</td><td>a term</td></tr><tr><td>is not</td><td>listed</td></tr></table>
</dd>
</dl>
<p>Text after the list.</p>
<h2>EXIT CODES</h2>
<table>
<tr><th>code</th><th>meaning</th></tr>
<tr><td>0</td><td>success</td></tr>
<tr><td>128</td><td>failure</td></tr>
</table>
<table><tr><td>Note</td><td>A one-row layout box is not a list.</td></tr></table>
<h3>Details</h3><p>More.</p>
</body></html>"""


def record(data: bytes, source: str) -> DocumentRecord:
    document = load_document(data, source)
    return record_of(
        document,
        chunk_document(document, max_chars=200, overlap=20),
        url="https://example.com/" + source,
        size=len(data),
        fingerprint="f1",
        changed_at=1000.0,
    )


def test_markdown_tables_give_their_first_cells_under_their_heading() -> None:
    found = record(MARKDOWN, "configuration.md")

    assert [h.text for h in found.headings] == ["Retrieval", "Guards", "Rate limits"]
    assert [(e.term, found.path(e.heading), e.kind) for e in found.entries] == [
        ("CANDOR_TOP_K", ("Retrieval",), "row"),
        ("CANDOR_API_KEYS / CANDOR_API_KEYS_PARAMETER", ("Retrieval",), "row"),
        ("CANDOR_RRF_K", ("Retrieval",), "row"),
        ("CANDOR_RATE_ADDRESS_LIMIT", ("Guards", "Rate limits"), "row"),
    ]


def test_html_definition_terms_are_entries_not_headings() -> None:
    found = record(HTML, "git-push.html")

    # The heading naming the page is its title, not a section of it.
    assert [(h.level, h.text) for h in found.headings] == [
        (2, "OPTIONS"),
        (2, "EXIT CODES"),
        (3, "Details"),
    ]
    assert found.paths[2] == ("EXIT CODES", "Details")
    assert [(e.term, found.path(e.heading), e.kind) for e in found.entries] == [
        ("--all", ("OPTIONS",), "term"),
        ("-n, --dry-run", ("OPTIONS",), "term"),
        ("0", ("EXIT CODES",), "row"),
        ("128", ("EXIT CODES",), "row"),
    ]


def test_each_heading_names_the_chunk_it_starts_in() -> None:
    document = load_document(HTML, "git-push.html")
    chunks = chunk_document(document, max_chars=200, overlap=20)
    found = record(HTML, "git-push.html")

    for heading, path in zip(found.headings, found.paths, strict=True):
        chunk = chunks[heading.chunk]
        assert chunk.heading.startswith(" > ".join(path)) or path[-1] in chunk.text


def test_a_record_keeps_the_title_address_size_and_when_it_changed() -> None:
    found = record(HTML, "git-push.html")

    assert (found.title, found.url, found.size, found.changed_at, found.fingerprint) == (
        "git-push(1)",
        "https://example.com/git-push.html",
        len(HTML),
        1000.0,
        "f1",
    )
    assert found.chars > 0


def test_a_record_reads_back_as_written() -> None:
    found = record(MARKDOWN, "configuration.md")

    read = decode(encode(found))
    assert read == found
    assert read is not None and read.paths == found.paths


def test_a_record_of_another_version_or_not_a_record_reads_as_none() -> None:
    assert decode(b"not compressed json") is None
    other = json.loads(zlib.decompress(encode(record(HTML, "a.html"))))
    other["v"] = 999
    assert decode(zlib.compress(json.dumps(other).encode())) is None


def test_a_huge_document_keeps_its_totals_and_fits_a_store_item() -> None:
    terms = [os.urandom(60).hex() for _ in range(MAX_ENTRIES)]  # incompressible
    huge = DocumentRecord(
        source="huge.html",
        title="Huge",
        url=None,
        size=10**8,
        chars=10**8,
        changed_at=0.0,
        fingerprint="f",
        headings=(Heading(2, "All"),),
        entries=tuple(Entry(term, 0) for term in terms),
        headings_total=1,
        entries_total=MAX_ENTRIES + 5,
    )

    body = encode(huge)
    kept = decode(body)

    assert len(body) <= MAX_RECORD_BYTES
    assert kept is not None and kept.entries_total == MAX_ENTRIES + 5
    assert 0 < len(kept.entries) < MAX_ENTRIES
    assert [e.term for e in kept.entries] == terms[: len(kept.entries)]
    assert not kept.complete


def test_a_stamp_reads_back_and_garbage_reads_as_none() -> None:
    stamp = Stamp("f1", "https://example.com/a", 12.5)

    assert Stamp.from_text(stamp.to_text()) == stamp
    assert Stamp.from_text("{") is None
    assert Stamp.from_text(None) is None
