"""Small, valid PDF files built byte by byte, for loader and ingestion tests.

Each page shows its lines in Helvetica; an optional outline (bookmarks) points at
pages; a page with no lines has no text at all, as a scanned page has none.
"""

from __future__ import annotations


def _string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
    return f"({escaped})"


def make_pdf(
    pages: list[list[str]],
    *,
    title: str | None = None,
    outline: list[tuple[str, int]] | None = None,
) -> bytes:
    """A PDF of `pages` (lines of ASCII text each) with `outline` (title, page index)."""
    objects: list[str] = []  # objects[i] is object number i + 1

    def add(body: str) -> int:
        objects.append(body)
        return len(objects)

    catalog = add("")  # filled in below, once the pages and outline exist
    pages_obj = add("")
    font = add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    page_ids: list[int] = []
    for lines in pages:
        shown = " T* ".join(f"{_string(line)} Tj" for line in lines)
        stream = f"BT /F1 12 Tf 72 720 Td 14 TL {shown} ET" if lines else ""
        contents = add(f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream")
        page_ids.append(
            add(
                f"<< /Type /Page /Parent {pages_obj} 0 R /MediaBox [0 0 612 792] "
                f"/Resources << /Font << /F1 {font} 0 R >> >> /Contents {contents} 0 R >>"
            )
        )
    kids = " ".join(f"{p} 0 R" for p in page_ids)
    objects[pages_obj - 1] = f"<< /Type /Pages /Kids [{kids}] /Count {len(page_ids)} >>"
    outline_ref = ""
    if outline:
        root = add("")
        items = [add("") for _ in outline]
        for n, (heading, page) in enumerate(outline):
            links = f"/Parent {root} 0 R /Dest [{page_ids[page]} 0 R /XYZ 0 792 0]"
            if n > 0:
                links += f" /Prev {items[n - 1]} 0 R"
            if n + 1 < len(items):
                links += f" /Next {items[n + 1]} 0 R"
            objects[items[n] - 1] = f"<< /Title {_string(heading)} {links} >>"
        objects[root - 1] = (
            f"<< /Type /Outlines /First {items[0]} 0 R /Last {items[-1]} 0 R /Count {len(items)} >>"
        )
        outline_ref = f" /Outlines {root} 0 R"
    objects[catalog - 1] = f"<< /Type /Catalog /Pages {pages_obj} 0 R{outline_ref} >>"
    info = add(f"<< /Title {_string(title)} >>") if title else None

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    trailer = f"<< /Size {len(objects) + 1} /Root {catalog} 0 R"
    if info is not None:
        trailer += f" /Info {info} 0 R"
    out += f"trailer\n{trailer} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)
