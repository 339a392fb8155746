#!/usr/bin/env bash
# Build Helm (the CLI only) from the Go module proxy into the cache outside the repository, keyed by
# version, so the release's chart can be linted and rendered by Helm itself. Idempotent; prints the
# binary's path.
#
#   tests/localcluster/build-helm.sh            # HELM_VERSION=v3.17.3 by default
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.17.3}"
BUILD_NAME=build-helm
# shellcheck source=tests/localcluster/goenv.sh
source "$(dirname "${BASH_SOURCE[0]}")/goenv.sh"
BIN="$CACHE/bin/helm-$HELM_VERSION"


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
