# Sourced by the build-*.sh scripts: the cache every upstream build shares, Go's environment for
# building from the Go module proxy alone, and the log helpers. Set BUILD_NAME before sourcing.
CACHE="${PHALANX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/phalanx}"
# Go's own caches live in the same place, so a CI machine that keeps $CACHE keeps them too.
export GOMODCACHE="${GOMODCACHE:-$CACHE/go/mod}"
export GOCACHE="${GOCACHE:-$CACHE/go/build}"
export GOPATH="${GOPATH:-$CACHE/go/path}"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
export GOPROXY="${GOPROXY:-https://proxy.golang.org}"
# Nothing but Go modules may be downloaded: no VCS fallback, no checksum-database surprises.
export GONOSUMDB="" GOPRIVATE=""

say() { printf '[%s %(%H:%M:%S)T] %s\n' "${BUILD_NAME:-build}" -1 "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }
