#!/usr/bin/env bash
# fetch-test-pdf.sh - fetch a real PDF for the PDF loader's test: the Debian
# Reference (English, GPL-2+) from Debian's `debian-reference-en` package, taken
# out of the .deb without installing it, the way the dev corpus is fetched.
#
# Usage: fetch-test-pdf.sh [OUTPUT_DIR]        (default: ./.candor/test-pdf)
#        FORCE=1 fetch-test-pdf.sh [OUTPUT_DIR] (download again even if present)
#
# It writes OUTPUT_DIR/debian-reference.en.pdf. The test that reads it
# (tests/unit/test_pdf_loader.py) runs when CANDOR_TEST_PDF names that file;
# `make test` fetches it and sets the variable.
#
# Idempotent: a PDF already at the path is kept and nothing is downloaded.
set -euo pipefail

OUT_ARG="${1:-./.candor/test-pdf}"
PKG=debian-reference-en
MEMBER=usr/share/debian-reference/debian-reference.en.pdf
NAME="${MEMBER##*/}"

die() { echo "fetch-test-pdf: $*" >&2; exit 1; }

mkdir -p -- "$OUT_ARG"
OUT="$(cd -- "$OUT_ARG" && pwd -P)"

is_pdf() { [ -s "$1" ] && [ "$(head -c 5 -- "$1")" = "%PDF-" ]; }

if [ "${FORCE:-0}" != 1 ] && is_pdf "$OUT/$NAME"; then
    echo "fetch-test-pdf: $OUT/$NAME already present, skipping download (FORCE=1 to refetch)"
    exit 0
fi

command -v dpkg-deb >/dev/null || die "dpkg-deb not found"
command -v apt-get >/dev/null || die "apt-get not found"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/fetch-test-pdf.XXXXXX")"
trap 'rm -rf -- "$TMP"' EXIT
# Let apt's unprivileged download user write here (avoids the "Download is
# performed unsandboxed" warning when run as root).
if [ "$(id -u)" = 0 ] && id _apt >/dev/null 2>&1; then
    chown _apt "$TMP" 2>/dev/null || true
fi
if ! (cd "$TMP" && apt-get download "$PKG"); then
    echo "fetch-test-pdf: download failed; running apt-get update and retrying" >&2
    apt-get update || die "apt-get update failed (are you root?)"
    (cd "$TMP" && apt-get download "$PKG") || die "apt-get download $PKG failed"
fi

DEB="$(find "$TMP" -maxdepth 1 -name "${PKG}_*.deb" | head -n 1)"
[ -n "$DEB" ] || die "no ${PKG}_*.deb found after download"
echo "fetch-test-pdf: package $(dpkg-deb -f "$DEB" Package) version $(dpkg-deb -f "$DEB" Version)"

mkdir -p "$TMP/x"
dpkg-deb -x "$DEB" "$TMP/x"
is_pdf "$TMP/x/$MEMBER" || die "unexpected package layout: $MEMBER missing or not a PDF"
# Copy then rename, so an interrupted run never leaves a half-written PDF behind.
cp -f -- "$TMP/x/$MEMBER" "$OUT/$NAME.part"
chmod 0644 "$OUT/$NAME.part"
mv -f -- "$OUT/$NAME.part" "$OUT/$NAME"
echo "fetch-test-pdf: $OUT/$NAME, $(stat -c %s "$OUT/$NAME") bytes"
