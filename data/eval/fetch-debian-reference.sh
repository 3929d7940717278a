#!/usr/bin/env bash
# fetch-debian-reference.sh - fetch the Debian Reference as one PDF (261 pages,
# DocBook through dblatex, with an outline) from the Debian package
# `debian-reference-en` (GPL-2+) into a corpus folder, without installing it.
# It is the same file the PDF loader's test reads (scripts/fetch-test-pdf.sh).
#
# Usage: fetch-debian-reference.sh [OUTPUT_DIR]   (default: ./corpus/debian-reference)
#        FORCE=1 fetch-debian-reference.sh [OUTPUT_DIR]  (download again)
#        DEBIAN_REFERENCE_DEB=/path/debian-reference-en_*.deb fetch-debian-reference.sh
#
# What is copied: usr/share/debian-reference/debian-reference.en.pdf alone. The
# package's HTML and text renderings of the same book are skipped: this corpus is
# the PDF a site owner would upload. One document, so its questions expect pages
# (debian-reference.en.pdf#page=N), not files.
#
# Idempotent: a PDF already in OUTPUT_DIR is kept and nothing is downloaded.
set -euo pipefail

OUT_ARG="${1:-./corpus/debian-reference}"
PKG=debian-reference-en
MEMBER=usr/share/debian-reference/debian-reference.en.pdf
NAME="${MEMBER##*/}"
HERE="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=deb-package.sh
. "$HERE/deb-package.sh"

mkdir -p -- "$OUT_ARG"
OUT="$(cd -- "$OUT_ARG" && pwd -P)"
is_pdf() { [ -s "$1" ] && [ "$(head -c 5 -- "$1")" = "%PDF-" ]; }

if [ "${FORCE:-0}" != 1 ] && is_pdf "$OUT/$NAME"; then
    echo "fetch-debian-reference: $OUT/$NAME already present, skipping download (FORCE=1 to refetch)"
    exit 0
fi

TMP="$(mktemp -d "${TMPDIR:-/tmp}/fetch-debian-reference.XXXXXX")"
trap 'rm -rf -- "$TMP"' EXIT
extract_deb "$PKG" "$TMP" "${DEBIAN_REFERENCE_DEB:-}"
is_pdf "$TMP/x/$MEMBER" || { echo "fetch-debian-reference: $MEMBER missing or not a PDF" >&2; exit 1; }
# Copy then rename, so an interrupted run never leaves a half-written PDF behind.
cp -f -- "$TMP/x/$MEMBER" "$OUT/$NAME.part"
chmod 0644 "$OUT/$NAME.part"
mv -f -- "$OUT/$NAME.part" "$OUT/$NAME"
echo "fetch-debian-reference: $OUT/$NAME, $(stat -c %s "$OUT/$NAME") bytes"
