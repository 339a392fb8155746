#!/usr/bin/env bash
# Build the cluster-autoscaler with only its kwok cloud provider (node groups of fake nodes made
# from templates), pinned, from the Go module proxy only, into the cache outside the repository
# keyed by version; copy the ProvisioningRequest CRD out of the apis module archive.
# Idempotent: a cached build is found in well under a second.
#
#   tests/localcluster/build-autoscaler.sh      # prints "<dir>" (the binary and manifests/)
set -euo pipefail

BUILD_NAME=build-autoscaler
# shellcheck source=tests/localcluster/goenv.sh
source "$(dirname "${BASH_SOURCE[0]}")/goenv.sh"

MODULE=k8s.io/autoscaler/cluster-autoscaler
# A commit of the 1.33 line (Kubernetes 1.33 modules) with the kwok provider and the
# ProvisioningRequest processors (best-effort-atomic-scale-up, check-capacity).
VERSION="${AUTOSCALER_VERSION:-v0.0.0-20250613073258-1959f5f61f6c}"
# Its go.mod replaces the apis module by the local ./apis, which cannot be honoured outside the
# repository: this published version of it has ProvisioningRequest v1 (Kueue v0.15.0 requires it).
APIS_MODULE=k8s.io/autoscaler/cluster-autoscaler/apis
APIS_VERSION="${AUTOSCALER_APIS_VERSION:-v0.0.0-20240830133931-adfbe7e45277}"
CRD=config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml

# The autoscaler's go.mod is not in the checksum database: skip it for this module only.
export GONOSUMDB=k8s.io/autoscaler

command -v go >/dev/null || die "Go is not installed (need Go >= 1.25 on PATH)"
mkdir -p "$GOMODCACHE" "$GOCACHE"

out="$CACHE/autoscaler/cluster-autoscaler-$VERSION"
download() {
  local json
  json=$(go mod download -json "$1@$2") || die "the Go module proxy refused $1@$2"
  sed -n "s/.*\"$3\": \"\(.*\)\".*/\1/p" <<<"$json"
}

# The CRD, copied from the apis module archive (cheap, so redone if it is missing).
mkdir -p "$out/manifests"
if [ ! -f "$out/manifests/provisioningrequests.yaml" ]; then
  apis_src=$(download "$APIS_MODULE" "$APIS_VERSION" Dir)
  [ -f "$apis_src/$CRD" ] || die "the apis module archive has no $CRD"
  cp "$apis_src/$CRD" "$out/manifests/provisioningrequests.yaml"
  chmod u+w "$out/manifests/provisioningrequests.yaml"
fi

if [ -x "$out/cluster-autoscaler" ]; then
  say "cluster-autoscaler $VERSION: cached"
  echo "$out"
  exit 0
fi

start=$(date +%s)
upstream_mod=$(download "$MODULE" "$VERSION" GoMod)
[ -f "$upstream_mod" ] || die "no go.mod for $MODULE@$VERSION"
work="$CACHE/work/cluster-autoscaler-$VERSION"
rm -rf "$work"; mkdir -p "$work"
# A throwaway module requiring the autoscaler, with its replace directives copied (a module's
# replaces only apply when it is the main module), the local ./apis one pinned instead.
{
  echo "module phalanx.local/autoscaler-build"
  echo
  echo "go 1.25.0"
  echo
  echo "require $MODULE $VERSION"
  echo
  awk '/^replace \(/{b=1;next} b&&/^\)/{b=0;next} b{print "replace " $0;next} /^replace /{print}' \
    "$upstream_mod" | grep -v '=> \.' || true
  echo "replace $APIS_MODULE => $APIS_MODULE $APIS_VERSION"
} >"$work/go.mod"
printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$MODULE" >"$work/tools.go"
say "  building the cluster-autoscaler, kwok provider only (cold: 2-5 minutes on 2 cores)"
# -tags kwok compiles in the kwok provider alone; no `go mod tidy` (it would resolve every build
# tag, so every cloud SDK): -mod=mod (goenv.sh) fetches just the modules this build imports.
(cd "$work" && go build -tags kwok -trimpath -ldflags "-s -w" -o "$out/cluster-autoscaler.tmp" "$MODULE") \
  || die "go build of the cluster-autoscaler failed"
mv "$out/cluster-autoscaler.tmp" "$out/cluster-autoscaler"
say "  cluster-autoscaler: done in $(( $(date +%s) - start ))s"
echo "$out"
