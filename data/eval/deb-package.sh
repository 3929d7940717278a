#!/usr/bin/env bash
# deb-package.sh - shared by the suite's corpus recipes (fetch-flask-doc.sh,
# fetch-manpages.sh, fetch-debian-reference.sh): download one Debian package
# with `apt-get download` (running `apt-get update` and retrying once if that
# fails) and extract it with `dpkg-deb -x`, so nothing is installed.
#
# Source it, then:  extract_deb PACKAGE TMPDIR [LOCAL_DEB]
# It extracts into TMPDIR/x and prints "name: package P version V" on stderr.
# LOCAL_DEB, when given, is used instead of a download.

extract_deb() {
    local pkg="$1" tmp="$2" local_deb="${3:-}" deb
    command -v dpkg-deb >/dev/null || { echo "$pkg: dpkg-deb not found" >&2; return 1; }
    if [ -n "$local_deb" ]; then
        [ -f "$local_deb" ] || { echo "$pkg: $local_deb is not a file" >&2; return 1; }
        cp -- "$local_deb" "$tmp/"
    else
        command -v apt-get >/dev/null || { echo "$pkg: apt-get not found" >&2; return 1; }
        # Let apt's unprivileged download user write here (avoids the
        # "Download is performed unsandboxed" warning when run as root).
        if [ "$(id -u)" = 0 ] && id _apt >/dev/null 2>&1; then
            chown _apt "$tmp" 2>/dev/null || true
        fi
        if ! (cd "$tmp" && apt-get download "$pkg"); then
            echo "$pkg: download failed; running apt-get update and retrying" >&2
            apt-get update || { echo "$pkg: apt-get update failed (are you root?)" >&2; return 1; }
            (cd "$tmp" && apt-get download "$pkg") || {
                echo "$pkg: apt-get download $pkg failed" >&2
                return 1
            }
        fi
    fi
    deb="$(find "$tmp" -maxdepth 1 -name "${pkg}_*.deb" | head -n 1)"
    [ -n "$deb" ] || { echo "$pkg: no ${pkg}_*.deb after download" >&2; return 1; }
    echo "$pkg: package $(dpkg-deb -f "$deb" Package) version $(dpkg-deb -f "$deb" Version)" >&2
    mkdir -p "$tmp/x"
    dpkg-deb -x "$deb" "$tmp/x"
}
