#!/usr/bin/env bash
# fetch-flask-doc.sh - fetch Flask's HTML manual (Sphinx, the Pallets theme) from
# the Debian package `python-flask-doc` (BSD-3-Clause) into a corpus folder,
# without installing the package.
#
# Usage: fetch-flask-doc.sh [OUTPUT_DIR]         (default: ./corpus/flask-doc)
#        FORCE=1 fetch-flask-doc.sh [OUTPUT_DIR]  (download again even if present)
#        FLASK_DOC_DEB=/path/python-flask-doc_*.deb fetch-flask-doc.sh [OUTPUT_DIR]
#
# What is copied: every *.html page under usr/share/doc/python-flask-doc/html/,
# keeping its folder (patterns/, tutorial/, deploying/ each have an index.html),
# decided by inspecting python-flask-doc 2.2.2-3 (Flask 2.2).
# What is skipped, and why:
#   index.html (top level)  the table of contents: links, and two lines of prose
#   genindex.html, py-modindex.html, search.html, 404.html
#                           Sphinx's generated index, module index, search and
#                           not-found pages: no documentation
#   _sources/               the reStructuredText sources of the same pages
#   _static/, _images/, objects.inv, searchindex.js   assets and search data
#
# Idempotent: if OUTPUT_DIR already holds config.html, api.html and at least
# $MIN_FILES pages, nothing is downloaded.
set -euo pipefail

OUT_ARG="${1:-./corpus/flask-doc}"
MIN_FILES="${MIN_FILES:-60}"
PKG=python-flask-doc
DOCDIR=usr/share/doc/python-flask-doc/html
EXCLUDE=(index.html genindex.html py-modindex.html search.html 404.html)
HERE="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=deb-package.sh
. "$HERE/deb-package.sh"

mkdir -p -- "$OUT_ARG"
OUT="$(cd -- "$OUT_ARG" && pwd -P)"

count() { find "$OUT" -type f -name '*.html' | wc -l; }
have_files() {
    [ -f "$OUT/config.html" ] && [ -f "$OUT/api.html" ] && [ "$(count)" -ge "$MIN_FILES" ]
}

if [ "${FORCE:-0}" != 1 ] && have_files; then
    echo "fetch-flask-doc: corpus already present, skipping download (FORCE=1 to refetch)"
    echo "$OUT: $(count) HTML files"
    exit 0
fi

TMP="$(mktemp -d "${TMPDIR:-/tmp}/fetch-flask-doc.XXXXXX")"
trap 'rm -rf -- "$TMP"' EXIT
extract_deb "$PKG" "$TMP" "${FLASK_DOC_DEB:-}"
SRC="$TMP/x/$DOCDIR"
[ -f "$SRC/config.html" ] || { echo "fetch-flask-doc: $SRC/config.html missing" >&2; exit 1; }

copied=0
while IFS= read -r -d '' f; do
    rel="${f#"$SRC"/}"
    case "$rel" in _sources/* | _static/* | _images/*) continue ;; esac
    for ex in "${EXCLUDE[@]}"; do
        [ "$rel" = "$ex" ] && continue 2
    done
    mkdir -p "$OUT/$(dirname -- "$rel")"
    cp -f -- "$f" "$OUT/$rel"
    chmod 0644 "$OUT/$rel"
    copied=$((copied + 1))
done < <(find "$SRC" -type f -name '*.html' -print0)

[ "$copied" -ge "$MIN_FILES" ] || { echo "fetch-flask-doc: only $copied pages" >&2; exit 1; }
echo "fetch-flask-doc: copied $copied pages"
echo "$OUT: $(count) HTML files"
