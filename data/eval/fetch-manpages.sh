#!/usr/bin/env bash
# fetch-manpages.sh - fetch the Linux man-pages project's pages in Debian's
# `manpages` package (mostly sections 4, 5 and 7: devices, file formats,
# overviews such as tcp(7), signal(7), capabilities(7)) and render each to plain
# text, as `man` shows it at 80 columns, into a flat corpus folder of NAME.S.txt
# files, without installing the package. The corpus is plain text: no markup,
# headings only as the capitalised lines man writes (NAME, DESCRIPTION, ...).
#
# Usage: fetch-manpages.sh [OUTPUT_DIR]         (default: ./corpus/manpages)
#        FORCE=1 fetch-manpages.sh [OUTPUT_DIR]  (download again even if present)
#        MANPAGES_DEB=/path/manpages_*.deb fetch-manpages.sh [OUTPUT_DIR]
#
# Needs man-db, groff-base and bsdextrautils (`man`, `col`), which every Debian
# system has. Pages are rendered with LC_ALL=C.UTF-8 MANWIDTH=80, no hyphenation
# and no justification, then `col -bx` (no backspace overstrikes, spaces for tabs),
# so the same groff gives the same bytes.
# What is skipped, and why (decided by inspecting manpages 6.03-2):
#   symbolic links and `.so` stubs    another name for a page that is kept
#   the character-set tables (ascii, armscii-8, cp1251, cp1252, iso_8859-*,
#   koi8-r, koi8-u)                   tables of code points, no prose;
#                                     charsets(7), which explains them, is kept
#
# Idempotent: if OUTPUT_DIR already holds tcp.7.txt, proc.5.txt and at least
# $MIN_FILES pages, nothing is downloaded.
set -euo pipefail

OUT_ARG="${1:-./corpus/manpages}"
MIN_FILES="${MIN_FILES:-150}"
PKG=manpages
MANDIR=usr/share/man
TABLES='^(ascii|armscii-8|cp1251|cp1252|iso_8859-[0-9]+|koi8-r|koi8-u)\.7$'
HERE="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=deb-package.sh
. "$HERE/deb-package.sh"

mkdir -p -- "$OUT_ARG"
OUT="$(cd -- "$OUT_ARG" && pwd -P)"

count() { find "$OUT" -maxdepth 1 -type f -name '*.txt' | wc -l; }
have_files() {
    [ -f "$OUT/tcp.7.txt" ] && [ -f "$OUT/proc.5.txt" ] && [ "$(count)" -ge "$MIN_FILES" ]
}

if [ "${FORCE:-0}" != 1 ] && have_files; then
    echo "fetch-manpages: corpus already present, skipping download (FORCE=1 to refetch)"
    echo "$OUT: $(count) text files"
    exit 0
fi
command -v man >/dev/null || { echo "fetch-manpages: man not found (apt-get install man-db)" >&2; exit 1; }
command -v col >/dev/null || { echo "fetch-manpages: col not found (apt-get install bsdextrautils)" >&2; exit 1; }

TMP="$(mktemp -d "${TMPDIR:-/tmp}/fetch-manpages.XXXXXX")"
trap 'rm -rf -- "$TMP"' EXIT
extract_deb "$PKG" "$TMP" "${MANPAGES_DEB:-}"
SRC="$TMP/x/$MANDIR"
[ -f "$SRC/man7/tcp.7.gz" ] || { echo "fetch-manpages: $SRC/man7/tcp.7.gz missing" >&2; exit 1; }

copied=0
while IFS= read -r -d '' f; do
    name="$(basename -- "$f" .gz)"
    [[ "$name" =~ $TABLES ]] && continue
    zcat -- "$f" | head -c 400 | grep -q '^\.so ' && continue
    LC_ALL=C.UTF-8 MANWIDTH=80 MAN_KEEP_FORMATTING='' \
        man --no-hyphenation --no-justification -l "$f" 2>/dev/null | col -bx > "$OUT/$name.txt.part"
    [ -s "$OUT/$name.txt.part" ] || { echo "fetch-manpages: $name rendered empty" >&2; exit 1; }
    mv -f -- "$OUT/$name.txt.part" "$OUT/$name.txt"
    chmod 0644 "$OUT/$name.txt"
    copied=$((copied + 1))
done < <(find "$SRC" -type f -name '*.gz' -print0)

[ "$copied" -ge "$MIN_FILES" ] || { echo "fetch-manpages: only $copied pages" >&2; exit 1; }
echo "fetch-manpages: rendered $copied pages"
echo "$OUT: $(count) text files"
