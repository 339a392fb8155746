#!/usr/bin/env bash
# Put promtool (Prometheus' rule checker and rule unit-test runner; the alert-rule tests run it) in
# the cache outside the repository, keyed by version, and print its path. Idempotent: a warm run
# only finds it. Where apt is (Debian, as on every machine of this project) promtool comes out of
# Debian's `prometheus` package, downloaded and unpacked, never installed (so no Prometheus
# service is set up); elsewhere it is built from the Go module proxy (several minutes cold).
#
#   tests/localcluster/build-promtool.sh     # prints the path of promtool
set -euo pipefail

# The Go module of Prometheus v3.16.0 (Prometheus tags its Go module v0.<major><minor>.<patch>).
PROMETHEUS_MODULE_VERSION="${PROMETHEUS_MODULE_VERSION:-v0.316.0}"
CACHE="${PHALANX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/phalanx}"

say() { printf '[build-promtool %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# Already there (either way): the newest one.
found=$(ls -d "$CACHE"/bin/promtool-*/promtool 2>/dev/null | sort -V | tail -n 1 || true)
if [ -n "$found" ] && [ -x "$found" ]; then
  echo "$found"
  exit 0
fi

from_debian() {
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || return 1
  local work; work=$(mktemp -d)
  # `apt-get download` needs the package lists; as root, fetch them once if they are missing.
  if ! (cd "$work" && apt-get download prometheus >/dev/null 2>"$work/log"); then
    [ "$(id -u)" = 0 ] || { rm -rf "$work"; return 1; }
    say "apt-get update (the package lists are missing)"
    apt-get update -qq >/dev/null 2>&1 || { rm -rf "$work"; return 1; }
    (cd "$work" && apt-get download prometheus >/dev/null 2>"$work/log") || { rm -rf "$work"; return 1; }
  fi
  local deb version bin
  deb=$(ls "$work"/prometheus_*.deb)
  version=$(dpkg-deb -f "$deb" Version | tr '+~:' '---')
  bin="$CACHE/bin/promtool-deb-$version"
  mkdir -p "$bin"
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" ./usr/bin/promtool
  mv "$work/usr/bin/promtool" "$bin/promtool"
  rm -rf "$work"
  say "promtool from Debian's prometheus $version"
  echo "$bin/promtool"
}

from_go() {
  command -v go >/dev/null || die "neither apt nor Go is available to get promtool (Go >= 1.26.7 builds Prometheus $PROMETHEUS_MODULE_VERSION)"
  local bin="$CACHE/bin/promtool-go-$PROMETHEUS_MODULE_VERSION"
  export GOMODCACHE="${GOMODCACHE:-$CACHE/go/mod}" GOCACHE="${GOCACHE:-$CACHE/go/build}" GOPATH="${GOPATH:-$CACHE/go/path}"
  export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod GOPROXY="${GOPROXY:-https://proxy.golang.org}"
  export GONOSUMDB="" GOPRIVATE=""
  mkdir -p "$bin" "$GOMODCACHE" "$GOCACHE"
  say "building promtool (github.com/prometheus/prometheus $PROMETHEUS_MODULE_VERSION; cold: several minutes)"
  # `go install module@version` builds with the module's own go.mod, as its release does.
  GOBIN="$bin/.tmp" go install -trimpath -ldflags "-s -w" \
    "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_MODULE_VERSION" \
    || die "go install of promtool failed"
  mv "$bin/.tmp/promtool" "$bin/promtool"
  rmdir "$bin/.tmp"
  echo "$bin/promtool"
}

from_debian || from_go
