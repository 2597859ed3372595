#!/usr/bin/env bash
# Installs Debian's Chromium (the headless browser of the dashboard test,
# crates/cli/tests/dashboard_browser.rs) with apt-get, unless a working one is already there.
# Prints the executable's path on stdout; everything else goes to stderr.
#
#   scripts/install-chromium.sh            # install if missing, print the path
#
# WALRAS_CHROMIUM names an executable to use instead. Installing needs root (or sudo without a
# password) and apt-get: Debian's `chromium` package, not a browser build downloaded by a tool.
set -euo pipefail

works() {
    [[ -x "$1" ]] && "$1" --version >/dev/null 2>&1
}

candidates=()
[[ -n "${WALRAS_CHROMIUM:-}" ]] && candidates+=("$WALRAS_CHROMIUM")
candidates+=(/usr/bin/chromium)
command -v chromium >/dev/null 2>&1 && candidates+=("$(command -v chromium)")
for candidate in "${candidates[@]}"; do
    if works "$candidate"; then
        echo "$candidate"
        exit 0
    fi
done

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-chromium: no chromium found and no apt-get to install it: install Debian's chromium package (or set WALRAS_CHROMIUM to a Chromium executable) and run again" >&2
    exit 1
fi
if [[ "$(id -u)" == "0" ]]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    echo "install-chromium: no chromium found; installing it needs root: run 'apt-get install chromium' as root (or this script with sudo) and run again" >&2
    exit 1
fi

echo "install-chromium: apt-get install chromium (a few minutes on a fresh machine)" >&2
"${as_root[@]}" apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends \
    chromium fonts-dejavu-core >&2
if ! works /usr/bin/chromium; then
    echo "install-chromium: /usr/bin/chromium does not run after installing" >&2
    exit 1
fi
echo /usr/bin/chromium
