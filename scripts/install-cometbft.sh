#!/usr/bin/env bash
# Installs the pinned CometBFT (the consensus engine of `walras node --consensus cometbft` and
# `walras localnet`) with `go install`, unless that version is already installed. Prints the
# executable's path on stdout; everything else goes to stderr.
#
#   scripts/install-cometbft.sh            # install if missing, print the path
#
# Needs Go 1.22 or newer (CometBFT 0.38's go.mod says so; Debian 12's golang-go is 1.19). It uses
# the first new enough `go` of the PATH, /usr/local/go/bin and its own cache; without one, on
# linux-amd64 it downloads the Go toolchain (the golang.org/toolchain module, the zip the go
# command itself fetches when it switches toolchains) from the Go module proxy, checks its
# SHA-256, and unpacks it under ${XDG_CACHE_HOME:-~/.cache}/walras/. It needs curl, unzip and
# sha256sum for that, and installs them with apt-get when run as root without them.
set -euo pipefail

VERSION="0.38.26"   # keep in step with COMETBFT_VERSION in crates/server/src/cometbft/mod.rs
MODULE="github.com/cometbft/cometbft/cmd/cometbft@v${VERSION}"
GO_MINOR_MIN=22
GO_TOOLCHAIN="go1.23.12"
GO_TOOLCHAIN_SHA256_LINUX_AMD64="7bf9a01c191c452bf1fa9266a547abe0e437ff46d16adc9ec55fcc4fea24c121"
GO_PROXY_URL="${WALRAS_GO_PROXY_URL:-https://proxy.golang.org}"

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

# Whether $1 is a Go of at least 1.$GO_MINOR_MIN.
go_new_enough() {
    local version
    version="$("$1" env GOVERSION 2>/dev/null)" || return 1
    [[ "$version" =~ ^go1\.([0-9]+) ]] && (( BASH_REMATCH[1] >= GO_MINOR_MIN ))
}

toolchain_dir="${XDG_CACHE_HOME:-$HOME/.cache}/walras/${GO_TOOLCHAIN}"

# Installs curl, unzip and sha256sum if one is missing (root with apt-get only).
need_download_tools() {
    local missing=()
    for tool in curl unzip sha256sum; do
        command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
    done
    (( ${#missing[@]} == 0 )) && return 0
    if [[ "$(id -u)" == "0" ]] && command -v apt-get >/dev/null 2>&1; then
        echo "install-cometbft: installing ${missing[*]} to download Go" >&2
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl unzip ca-certificates coreutils >&2
    else
        echo "install-cometbft: ${missing[*]} needed to download Go: install them, or install Go 1.${GO_MINOR_MIN}+, and run again" >&2
        exit 1
    fi
}

# Downloads the pinned Go toolchain into $toolchain_dir/go.
download_go() {
    if [[ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]]; then
        echo "install-cometbft: no Go 1.${GO_MINOR_MIN}+ found, and this script downloads one only on linux-amd64: install Go 1.${GO_MINOR_MIN}+ and run again" >&2
        exit 1
    fi
    need_download_tools
    local url="${GO_PROXY_URL}/golang.org/toolchain/@v/v0.0.1-${GO_TOOLCHAIN}.linux-amd64.zip"
    local work
    mkdir -p "$(dirname "$toolchain_dir")"
    work="$(mktemp -d "${toolchain_dir}.XXXXXX")"
    echo "install-cometbft: no Go 1.${GO_MINOR_MIN}+ found; downloading ${GO_TOOLCHAIN} (about 75 MB) from ${url}" >&2
    curl -fsSL --retry 3 -o "$work/go.zip" "$url"
    if ! echo "${GO_TOOLCHAIN_SHA256_LINUX_AMD64}  $work/go.zip" | sha256sum --check --status; then
        echo "install-cometbft: the downloaded ${GO_TOOLCHAIN} does not have the pinned SHA-256; not using it" >&2
        rm -rf "$work"
        exit 1
    fi
    unzip -q "$work/go.zip" -d "$work/unpacked"
    local root="$work/unpacked/golang.org/toolchain@v0.0.1-${GO_TOOLCHAIN}.linux-amd64"
    # Module zips keep no file modes: make the go command and its tools executable, as the go
    # command does when it switches to a downloaded toolchain.
    chmod +x "$root"/bin/* "$root"/pkg/tool/*/*
    rm -rf "$toolchain_dir"
    mkdir -p "$toolchain_dir"
    mv "$root" "$toolchain_dir/go"
    rm -rf "$work"
}

go_bin=""
for candidate in "$(command -v go 2>/dev/null || true)" /usr/local/go/bin/go "$toolchain_dir/go/bin/go"; do
    if [[ -n "$candidate" && -x "$candidate" ]] && go_new_enough "$candidate"; then
        go_bin="$candidate"
        break
    elif [[ -n "$candidate" && -x "$candidate" ]]; then
        echo "install-cometbft: skipping $candidate ($("$candidate" env GOVERSION 2>/dev/null || echo 'unknown version'); CometBFT needs Go 1.${GO_MINOR_MIN}+)" >&2
    fi
done
if [[ -z "$go_bin" ]]; then
    download_go
    go_bin="$toolchain_dir/go/bin/go"
    go_new_enough "$go_bin" || { echo "install-cometbft: the downloaded Go does not run" >&2; exit 1; }
fi
export PATH="$(dirname "$go_bin"):$PATH"

echo "install-cometbft: $(go env GOVERSION) install ${MODULE} (a few minutes on 2 cores)" >&2
go install "$MODULE" >&2
gobin="$(go env GOBIN)"
[[ -z "$gobin" ]] && gobin="$(go env GOPATH)/bin"
binary="$gobin/cometbft"
if [[ "$(installed_version "$binary")" != "$VERSION" ]]; then
    echo "install-cometbft: $binary does not report version ${VERSION} after installing" >&2
    exit 1
fi
echo "$binary"
