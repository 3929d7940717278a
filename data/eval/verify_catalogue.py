#!/usr/bin/env python3
"""Verify a catalogue question set (kinds catalogue and list) against its corpus.

Usage: verify_catalogue.py QUESTIONS.jsonl CORPUS_DIR

For every line it checks:
  * the schema: id, question, kind (catalogue or list), expected_sources, entries
    (at least one), notes; ids unique;
  * every expected source exists as a file under CORPUS_DIR;
  * every entry that is not a count occurs in the plain text of one of the expected
    sources (of any file when none is expected), compared case-insensitively with
    all whitespace removed, after HTML tags are stripped and entities unescaped;
  * an entry that is a count (the question's "count" says of what) equals that
    count, taken from the raw files: "pages" counts the corpus's HTML files, "dt"
    the top-level definition-list terms of a source (consecutive terms sharing one
    description count once), "h3" its h3 headings.
Prints a summary and exits 1 on any failure (2 on wrong usage). Stdlib only, and
independent of candor's own loaders: the sets measure them.
"""
import html
import json
import os
import re
import sys

KINDS = ("catalogue", "list")
REQUIRED = ("id", "question", "kind", "expected_sources", "entries", "notes")
_DROP = re.compile(r"(?is)<(script|style)\b.*?</\1\s*>|<!--.*?-->")
_TAG = re.compile(r"(?s)<[^>]*>")
_SPACE = re.compile(r"\s+")


def squeezed(text):
    return _SPACE.sub("", text).casefold()


def plain(raw):
    return html.unescape(_TAG.sub("", _DROP.sub(" ", raw)))


def dt_groups(raw):
    groups, depth, last = 0, 0, None
    for tag in re.finditer(r"<(/?)(dl|dt|dd)\b[^>]*>", raw):
        closing, name = bool(tag.group(1)), tag.group(2)
        if name == "dl":
            depth += -1 if closing else 1
        elif depth == 1 and not closing:
            if name == "dt" and last != "dt":
                groups += 1
            last = name
    return groups


def count(spec, corpus):
    what = spec.get("what")
    if what == "pages":
        return sum(1 for name in os.listdir(corpus) if name.lower().endswith((".html", ".htm")))
    with open(os.path.join(corpus, spec["source"]), encoding="utf-8", errors="replace") as f:
        raw = f.read()
    if what == "dt":
        return dt_groups(raw)
    if what == "h3":
        return len(re.findall(r"<h3\b", raw))
    raise ValueError(f"unknown count {what!r}")


def main(argv):
    if len(argv) != 3:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    path, corpus = argv[1], argv[2]
    problems, seen, checked, texts = [], set(), 0, {}

    def text_of(name):
        if name not in texts:
            with open(os.path.join(corpus, name), encoding="utf-8", errors="replace") as f:
                raw = f.read()
            texts[name] = squeezed(plain(raw) if name.lower().endswith((".html", ".htm")) else raw)
        return texts[name]

    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    everything = None
    for row in rows:
        where = row.get("id", "?")
        missing = [k for k in REQUIRED if k not in row]
        if missing or row["kind"] not in KINDS or not row["entries"] or row["id"] in seen:
            problems.append(f"{where}: schema (missing {missing}, kind {row.get('kind')!r})")
            continue
        seen.add(row["id"])
        sources = row["expected_sources"]
        absent = [s for s in sources if not os.path.isfile(os.path.join(corpus, s))]
        if absent:
            problems.append(f"{where}: expected sources not in the corpus: {absent}")
            continue
        for entry in row["entries"]:
            checked += 1
            if entry.isdigit() and "count" in row:
                found = count(row["count"], corpus)
                if found != int(entry):
                    problems.append(f"{where}: {row['count']} counts {found}, not {entry}")
                continue
            if sources:
                held = any(squeezed(entry) in text_of(s) for s in sources)
            else:
                if everything is None:
                    names = [n for n in os.listdir(corpus) if n.endswith((".html", ".htm", ".md"))]
                    everything = "\n".join(text_of(n) for n in names)
                held = squeezed(entry) in everything
            if not held:
                problems.append(f"{where}: entry {entry!r} is in none of {sources or 'the corpus'}")
    kinds = {k: sum(1 for r in rows if r.get("kind") == k) for k in KINDS}
    print(f"questions: {len(rows)} ({', '.join(f'{k} {n}' for k, n in kinds.items())})")
    print(f"checked: {checked} entries")
    for problem in problems:
        print(f"FAIL {problem}")
    print("RESULT: " + ("OK" if not problems else f"{len(problems)} problems"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
