#!/usr/bin/env bash
# Build the workload operators e2e tests run beside Phalanx, pinned, from the Go module proxy only,
# into a cache outside the repository keyed by version; copy their CRDs (and webhook manifests)
# out of the same module archives. Idempotent: a cached operator is skipped in well under a second.
#
#   tests/localcluster/build-operators.sh                 # all of them
#   tests/localcluster/build-operators.sh jobset lws      # only these
# Prints one line per operator: "<name> <dir>" (the dir holds the binary and its manifests).
set -euo pipefail

BUILD_NAME=build-operators
# shellcheck source=tests/localcluster/goenv.sh
source "$(dirname "${BASH_SOURCE[0]}")/goenv.sh"
# The same Go caches as build-binaries.sh: the operators share most of their dependencies with it.

# name | module | version | main package (relative to the module) | manifests to copy (relative)
OPERATORS=(
  "mpi-operator|github.com/kubeflow/mpi-operator|v0.6.0|cmd/mpi-operator|manifests/base/kubeflow.org_mpijobs.yaml"
  "kuberay|github.com/ray-project/kuberay/ray-operator|v1.4.2|.|config/crd/bases/ray.io_rayclusters.yaml config/crd/bases/ray.io_rayjobs.yaml config/crd/bases/ray.io_rayservices.yaml"
  "jobset|sigs.k8s.io/jobset|v0.10.1|.|config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml config/components/webhook/manifests.yaml"
  "lws|sigs.k8s.io/lws|v0.7.0|cmd|config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml config/webhook/manifests.yaml"
  "trainer|github.com/kubeflow/trainer/v2|v2.0.0|cmd/trainer-controller-manager|manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml manifests/base/crds/trainer.kubeflow.org_trainingruntimes.yaml manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml manifests/base/webhook/manifests.yaml manifests/base/runtimes/torch_distributed.yaml"
)


command -v go >/dev/null || die "Go is not installed (need Go >= 1.25 on PATH)"
mkdir -p "$GOMODCACHE" "$GOCACHE"

# A throwaway module requiring $module@$version, with the module's own replace directives copied
# (a module's replaces only apply when it is the main module) -- as build-binaries.sh does.
make_module() {
  local dir=$1 module=$2 version=$3 upstream_mod=$4
  rm -rf "$dir"; mkdir -p "$dir"
  {
    echo "module phalanx.local/operator-build"
    echo
    echo "go 1.25.0"
    grep -m1 '^godebug ' "$upstream_mod" || true
    echo
    echo "require $module $version"
    echo
    # Single-line and block replaces alike; local-path replaces cannot be honoured outside the repo.
    awk '/^replace \(/{b=1;next} b&&/^\)/{b=0;next} b{print "replace " $0;next} /^replace /{print}' \
      "$upstream_mod" | grep -v '=> \.' || true
  } >"$dir/go.mod"
}

# mpi-operator's health server listens on a hard-coded :8080 (a package variable). One extra file
# compiled into its package (nothing upstream is edited) lets the launcher pick a free port instead,
# so operators of several clusters on one machine do not collide. Go refuses overlays of files in
# the module cache, so the build uses a private copy of the module through a replace directive.
mpi_health_port() {
  local work=$1 src=$2 module=$3
  cp -r "$src" "$work/src"; chmod -R u+w "$work/src"
  cat >"$work/src/cmd/mpi-operator/app/phalanx_health_port.go" <<'GO'
package app

import (
	"os"
	"strconv"
)

func init() {
	if port, err := strconv.Atoi(os.Getenv("PHALANX_MPI_OPERATOR_HEALTH_PORT")); err == nil && port > 0 {
		healthCheckPort = port
	}
}
GO
  echo "replace $module => ./src" >>"$work/go.mod"
}

# The operator's manifests, copied from its module archive (cheap, so redone when the list grows).
copy_manifests() {
  local src=$1 out=$2 manifests=$3
  mkdir -p "$out/manifests"
  for m in $manifests; do
    local dest; dest="$out/manifests/$(tr / _ <<<"$m")"
    [ -f "$dest" ] && continue
    [ -f "$src/$m" ] || die "the module archive has no $m"
    cp "$src/$m" "$dest"; chmod u+w "$dest"
  done
}

build_one() {
  local name=$1 module=$2 version=$3 main=$4 manifests=$5
  local out="$CACHE/operators/$name-$version"
  local json src upstream_mod
  json=$(go mod download -json "$module@$version") || die "the Go module proxy refused $module@$version"
  src=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' <<<"$json")
  upstream_mod=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' <<<"$json")
  [ -d "$src" ] && [ -f "$upstream_mod" ] || die "no source archive for $module@$version"
  copy_manifests "$src" "$out" "$manifests"
  if [ -x "$out/$name" ]; then
    say "$name $version: cached"
    echo "$name $out"
    return
  fi
  local start; start=$(date +%s)
  local work="$CACHE/work/operator-$name-$version"
  make_module "$work" "$module" "$version" "$upstream_mod"
  [ "$name" = mpi-operator ] && mpi_health_port "$work" "$src" "$module"
  local pkg="$module"; [ "$main" = "." ] || pkg="$module/$main"
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" >"$work/tools.go"
  say "$name $version: resolving modules"
  (cd "$work" && go mod tidy -e >/dev/null 2>"$work/tidy.log") || { tail -n 20 "$work/tidy.log" >&2; die "go mod tidy failed for $name"; }
  say "  building $name (cold: 3-8 minutes on 2 cores)"
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$out/$name.tmp" "$pkg") \
    || die "go build of $name failed"
  mv "$out/$name.tmp" "$out/$name"
  say "  $name: done in $(( $(date +%s) - start ))s"
  echo "$name $out"
}

wanted=("$@")
for entry in "${OPERATORS[@]}"; do
  IFS='|' read -r name module version main manifests <<<"$entry"
  if [ ${#wanted[@]} -gt 0 ] && [[ ! " ${wanted[*]} " == *" $name "* ]]; then continue; fi
  build_one "$name" "$module" "$version" "$main" "$manifests"
done
for w in "${wanted[@]}"; do
  printf '%s\n' "${OPERATORS[@]}" | grep -q "^$w|" || die "unknown operator $w (known: mpi-operator kuberay jobset lws trainer)"
done
