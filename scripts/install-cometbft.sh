#!/usr/bin/env bash
# Installs the pinned CometBFT (the consensus engine of `walras node --consensus cometbft` and
# `walras localnet`) with `go install`, unless that version is already installed. Prints the
# executable's path on stdout; everything else goes to stderr.
#
#   scripts/install-cometbft.sh            # install if missing, print the path
#
# Needs Go (1.22 or newer). Without Go on the PATH it looks in /usr/local/go/bin, then tries
# Debian's golang-go package when run as root.
set -euo pipefail

VERSION="0.38.26"   # keep in step with COMETBFT_VERSION in crates/node/src/server/cometbft/mod.rs
MODULE="github.com/cometbft/cometbft/cmd/cometbft@v${VERSION}"

installed_version() {
    "$1" version 2>/dev/null | head -n 1 | tr -d '[:space:]'
}

candidates=()
[[ -n "${WALRAS_COMETBFT:-}" ]] && candidates+=("$WALRAS_COMETBFT")
command -v cometbft >/dev/null 2>&1 && candidates+=("$(command -v cometbft)")
[[ -n "${GOBIN:-}" ]] && candidates+=("$GOBIN/cometbft")
[[ -n "${GOPATH:-}" ]] && candidates+=("$GOPATH/bin/cometbft")
candidates+=("$HOME/go/bin/cometbft")
for candidate in "${candidates[@]}"; do
    if [[ -x "$candidate" && "$(installed_version "$candidate")" == "$VERSION" ]]; then
        echo "$candidate"
        exit 0
    fi
done

if ! command -v go >/dev/null 2>&1; then
    if [[ -x /usr/local/go/bin/go ]]; then
        export PATH="/usr/local/go/bin:$PATH"
    elif [[ "$(id -u)" == "0" ]] && command -v apt-get >/dev/null 2>&1; then
        echo "install-cometbft: no Go found; installing Debian's golang-go" >&2
        apt-get update -qq >&2 && apt-get install -y -qq golang-go >&2
    else
        echo "install-cometbft: Go is needed to install CometBFT ${VERSION}: install Go 1.22+ and run again" >&2
        exit 1
    fi
fi

echo "install-cometbft: go install ${MODULE} (a few minutes on 2 cores)" >&2
go install "$MODULE" >&2
gobin="$(go env GOBIN)"
[[ -z "$gobin" ]] && gobin="$(go env GOPATH)/bin"
binary="$gobin/cometbft"
if [[ "$(installed_version "$binary")" != "$VERSION" ]]; then
    echo "install-cometbft: $binary does not report version ${VERSION} after installing" >&2
    exit 1
fi
echo "$binary"
