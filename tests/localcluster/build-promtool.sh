#!/usr/bin/env bash
# Build promtool (Prometheus' rule checker and rule unit-test runner) from the Go module proxy into
# the cache outside the repository, keyed by version; the alert-rule tests run it. Idempotent: a
# warm run only checks the cache and prints the binary's path.
#
#   tests/localcluster/build-promtool.sh     # build if missing, print the path of promtool
set -euo pipefail

# The Go module of Prometheus v3.16.0 (Prometheus tags its Go module v0.<major><minor>.<patch>).
PROMETHEUS_MODULE_VERSION="${PROMETHEUS_MODULE_VERSION:-v0.316.0}"
CACHE="${PHALANX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/phalanx}"
BIN="$CACHE/bin/promtool-$PROMETHEUS_MODULE_VERSION"
export GOMODCACHE="${GOMODCACHE:-$CACHE/go/mod}"
export GOCACHE="${GOCACHE:-$CACHE/go/build}"
export GOPATH="${GOPATH:-$CACHE/go/path}"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
export GOPROXY="${GOPROXY:-https://proxy.golang.org}"
export GONOSUMDB="" GOPRIVATE=""

say() { printf '[build-promtool %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

if [ -x "$BIN/promtool" ]; then
  echo "$BIN/promtool"
  exit 0
fi
command -v go >/dev/null || die "Go is not installed (need Go >= 1.26.7 on PATH for Prometheus $PROMETHEUS_MODULE_VERSION)"
mkdir -p "$BIN" "$GOMODCACHE" "$GOCACHE"
say "building promtool (github.com/prometheus/prometheus $PROMETHEUS_MODULE_VERSION; cold: several minutes)"
# `go install module@version` builds with the module's own go.mod, as its release does.
GOBIN="$BIN/.tmp" go install -trimpath -ldflags "-s -w" \
  "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_MODULE_VERSION" \
  || die "go install of promtool failed"
mv "$BIN/.tmp/promtool" "$BIN/promtool"
rmdir "$BIN/.tmp"
say "promtool: done"
echo "$BIN/promtool"
