#!/usr/bin/env bash
# What the widget's browser tests need, installed once when missing:
#   - Debian's chromium (apt-get), driven by Python Playwright with
#     executable_path=/usr/bin/chromium. Never `playwright install`: it downloads a
#     browser build of its own, which this setup neither needs nor can fetch.
#   - axe-core from npm into .candor/axe-core/, which the accessibility test
#     injects into the page.
# Prints the path of axe.min.js.
set -euo pipefail

AXE_VERSION=4.14.1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREFIX=${CANDOR_AXE_PREFIX:-$ROOT/.candor/axe-core}
AXE=$PREFIX/node_modules/axe-core/axe.min.js

if [[ ! -x /usr/bin/chromium ]]; then
    echo "installing Debian's chromium (apt-get)" >&2
    if [[ $(id -u) -eq 0 ]]; then SUDO=(); else SUDO=(sudo); fi
    "${SUDO[@]}" apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq chromium >&2
fi

if [[ ! -f $AXE ]]; then
    echo "installing axe-core@$AXE_VERSION (npm) into $PREFIX" >&2
    mkdir -p "$PREFIX"
    npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error \
        "axe-core@$AXE_VERSION" >&2
fi
[[ -f $AXE ]] || { echo "no axe.min.js in $PREFIX" >&2; exit 1; }
echo "$AXE"
