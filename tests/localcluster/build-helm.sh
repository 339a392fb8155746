#!/usr/bin/env bash
# Build Helm (the CLI only) from the Go module proxy into the cache outside the repository, keyed by
# version, so the release's chart can be linted and rendered by Helm itself. Idempotent; prints the
# binary's path.
#
#   tests/localcluster/build-helm.sh            # HELM_VERSION=v3.17.3 by default
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.17.3}"
CACHE="${PHALANX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/phalanx}"
BIN="$CACHE/bin/helm-$HELM_VERSION"
export GOMODCACHE="${GOMODCACHE:-$CACHE/go/mod}"
export GOCACHE="${GOCACHE:-$CACHE/go/build}"
export GOPATH="${GOPATH:-$CACHE/go/path}"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
export GOPROXY="${GOPROXY:-https://proxy.golang.org}"
export GONOSUMDB="" GOPRIVATE=""

say() { printf '[build-helm %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

if [ -x "$BIN/helm" ]; then echo "$BIN/helm"; exit 0; fi
command -v go >/dev/null || die "Go is not installed (a build tool only)"
mkdir -p "$BIN" "$GOMODCACHE" "$GOCACHE"
start=$(date +%s)
say "building helm $HELM_VERSION from the Go module proxy"
GOBIN="$BIN" nice -n 10 go install \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
  "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" \
  || die "go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION failed"
say "built helm in $(( $(date +%s) - start ))s"
echo "$BIN/helm"
