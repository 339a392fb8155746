#!/usr/bin/env bash
# Build the peer gang schedulers `make bench-peers` compares Phalanx with, from the Go module
# proxy only, into a cache outside the repository keyed by version (nothing upstream is ever
# committed). Each peer is built in a throwaway module that requires it at an exact version and
# copies the peer's own `replace` directives (plus the few re-pins listed below), so its
# dependency graph is the one its release was built with. Idempotent: cached peers are skipped.
#
#   tests/localcluster/build-peers.sh                 # every peer; prints "name<TAB>dir|BLOCKED"
#   tests/localcluster/build-peers.sh coscheduling    # just one
#   tests/localcluster/build-peers.sh volcano-topology  # the Volcano the topology scenario runs
#
# A peer that cannot be built here (e.g. its source archive is refused) does not fail the
# script: its line says BLOCKED and $dir/../<name>.blocked records the exact error.
set -uo pipefail

BUILD_NAME=build-peers
# shellcheck source=tests/localcluster/goenv.sh
source "$(dirname "${BASH_SOURCE[0]}")/goenv.sh"
PEERS_BIN="$CACHE/bin/peers"
# The machine is shared: builds yield to everything else.
NICE="nice -n ${PEERS_NICE:-10}"

COSCHEDULING_VERSION="${COSCHEDULING_VERSION:-v0.34.7}"
KUEUE_VERSION="${KUEUE_VERSION:-v0.15.0}"
VOLCANO_VERSION="${VOLCANO_VERSION:-v1.10.0}"
# The first Volcano whose PodGroup says "inside one rack" (networkTopology, HyperNodes); only the
# topology scenario runs it, so the other scenarios' figures stay those of v1.10.0.
VOLCANO_TOPOLOGY_VERSION="${VOLCANO_TOPOLOGY_VERSION:-v1.12.2}"
KAI_VERSION="${KAI_VERSION:-v0.12.0}"


command -v go >/dev/null || { say "ERROR: Go is not installed"; exit 1; }
mkdir -p "$PEERS_BIN" "$GOMODCACHE" "$GOCACHE"

# The upstream go.mod's remote replace directives as "module=>target version" words (local
# path replaces are dropped: they point into the upstream checkout, which a module zip lacks).
upstream_replaces() {
  awk '
    /^replace[ \t]*\(/ { inblock = 1; next }
    inblock && /^\)/   { inblock = 0; next }
    inblock || /^replace[ \t]/ {
      line = $0; sub(/^replace[ \t]+/, "", line); sub(/\/\/.*/, "", line)
      n = split(line, w, /[ \t]+/); k = 0
      for (i = 1; i <= n; i++) if (w[i] != "") f[++k] = w[i]
      # forms: "a => b v" or "a va => b v"
      if (k == 4 && f[2] == "=>" && f[3] !~ /^\./) print f[1] "=>" f[3] "@" f[4]
      if (k == 5 && f[3] == "=>" && f[4] !~ /^\./) print f[1] "=>" f[4] "@" f[5]
    }' "$1"
}

# $1 dir, $2 module, $3 version, $4 upstream go.mod, $5 overrides ("module=>target@version" words)
write_module() {
  local dir=$1 module=$2 version=$3 upstream=$4 overrides=$5 r key target
  local godebug
  godebug=$(grep -m1 '^godebug ' "$upstream" || true)
  mkdir -p "$dir"
  declare -A replace=()
  for r in $(upstream_replaces "$upstream") $overrides; do replace[${r%%=>*}]=${r#*=>}; done
  {
    echo "module phalanx.local/peer-build"
    echo
    echo "go 1.25.0"
    [ -n "$godebug" ] && echo "$godebug"
    echo
    echo "require $module $version"
    echo
    for key in "${!replace[@]}"; do
      target=${replace[$key]}
      echo "replace $key => ${target%@*} ${target##*@}"
    done
  } >"$dir/go.mod"
}

# copy_manifests SRC OUT "globs": CRDs and stock configs the launcher needs, next to the binaries.
copy_manifests() {
  local src=$1 out=$2 f
  for f in $(cd "$src" && ls -d $3); do
    mkdir -p "$out/manifests/$(dirname "$f")"; cp "$src/$f" "$out/manifests/$f"; chmod 0644 "$out/manifests/$f"
  done
}

# build_peer NAME MODULE VERSION "cmd/a:bin-a cmd/b:bin-b" "overrides" "manifests to keep (module-relative globs)" [fallback]
# The printed name and the .blocked file are $PEER_LABEL's when set (a second build of one peer).
build_peer() {
  local name=$1 module=$2 version=$3 cmds=$4 overrides=$5 keep=$6 fallback=${7:-}
  local label=${PEER_LABEL:-$1}
  local out="$PEERS_BIN/$name-$version" work="$CACHE/work/peer-$name-$version" blocked="$PEERS_BIN/$label-$version.blocked"
  local all=1 c
  for c in $cmds; do [ -x "$out/${c##*:}" ] || all=0; done
  local info upstream src f
  if [ $all = 1 ]; then
    # Manifests are refreshed from the (cached) module even when the binaries are cached.
    src=$(go mod download -json "$module@$version" 2>/dev/null | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    [ -n "$src" ] && copy_manifests "$src" "$out" "$keep"
    say "$name $version: cached"; printf '%s\t%s\n' "$label" "$out"; return 0
  fi
  rm -f "$blocked"
  if ! info=$(go mod download -json "$module@$version" 2>&1); then
    echo "go mod download $module@$version: $(printf '%s' "$info" | grep -m1 -i error)" >"$blocked"
    say "$name $version: BLOCKED: $(cat "$blocked")"; printf '%s\tBLOCKED\n' "$label"; return 0
  fi
  upstream=$(printf '%s' "$info" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  src=$(printf '%s' "$info" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  rm -rf "$work"
  write_module "$work" "$module" "$version" "$upstream" "$overrides"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for c in $cmds; do printf '\t_ "%s/%s"\n' "$module" "${c%%:*}"; done
    printf ')\n'
  } >"$work/tools.go"
  say "$name $version: resolving modules"
  # A replaced module whose pinned version the proxy refuses is re-pinned to $fallback (when the
  # peer has one), one refusal at a time, and the re-pins are recorded next to the binaries.
  local refused_re=': (403 Forbidden|404 Not Found|410 Gone)' round repins=""
  for round in $(seq 1 40); do
    if ! (cd "$work" && $NICE go mod tidy -e >/dev/null 2>"$work/tidy.log"); then
      cp "$work/tidy.log" "$blocked"; say "$name: go mod tidy failed"; printf '%s\tBLOCKED\n' "$label"; return 0
    fi
    grep -q -E "$refused_re" "$work/tidy.log" || break
    local refused
    refused=$(grep -E "$refused_re" "$work/tidy.log" | sed -n -E 's/.*\(replaced by ([^@ ]+)@.*/\1/p' | sort -u)
    if [ -z "$fallback" ] || [ -z "$refused" ] || [ "$round" = 40 ]; then
      grep -m3 -E "$refused_re" "$work/tidy.log" >"$blocked"
      say "$name $version: BLOCKED: $(head -1 "$blocked")"; printf '%s\tBLOCKED\n' "$label"; return 0
    fi
    for r in $refused; do overrides="$overrides $r=>$r@$fallback"; repins="$repins $r"; done
    say "$name: the proxy refuses$(printf ' %s' $refused) at the pinned version; re-pinned to $fallback"
    write_module "$work" "$module" "$version" "$upstream" "$overrides"
  done
  mkdir -p "$out"
  printf '%s\n' $overrides >"$out/repins.txt"
  for c in $cmds; do
    local bin=${c##*:} pkg="$module/${c%%:*}"
    [ -x "$out/$bin" ] && continue
    say "  building $bin from $pkg (cold: several minutes on a shared machine)"
    if ! (cd "$work" && $NICE go build -trimpath -ldflags "-s -w" -o "$out/$bin.tmp" "$pkg" 2>"$work/build-$bin.log"); then
      { echo "go build $pkg@$version failed:"; tail -n 15 "$work/build-$bin.log"; } >"$blocked"
      say "$name: $(head -3 "$blocked" | tr '\n' ' ')"; printf '%s\tBLOCKED\n' "$label"; return 0
    fi
    mv "$out/$bin.tmp" "$out/$bin"
  done
  # Manifests (CRDs, stock configs) the launcher needs, copied next to the binaries.
  copy_manifests "$src" "$out" "$keep"
  say "$name $version: done"
  printf '%s\t%s\n' "$label" "$out"
}

want=${1:-all}
if [ "$want" = all ] || [ "$want" = coscheduling ]; then
  # The proxy refuses some k8s.io staging modules at v0.34.7 (403 "This module version is not
  # available", e.g. csi-translation-lib, cluster-bootstrap, cri-client); each refused one is
  # re-pinned to v0.34.2, which is served. repins.txt beside the binaries lists them.
  build_peer coscheduling sigs.k8s.io/scheduler-plugins "$COSCHEDULING_VERSION" \
    "cmd/scheduler:kube-scheduler cmd/controller:controller" "" \
    "manifests/coscheduling/*.yaml manifests/capacityscheduling/crd.yaml" v0.34.2
fi
if [ "$want" = all ] || [ "$want" = kueue ]; then
  build_peer kueue sigs.k8s.io/kueue "$KUEUE_VERSION" "cmd/kueue:kueue" "" \
    "config/components/crd/bases/*.yaml config/components/crd/kustomization.yaml config/components/crd/patches/webhook_in_*.yaml config/components/manager/controller_manager_config.yaml config/components/webhook/manifests.yaml"
fi
if [ "$want" = all ] || [ "$want" = volcano ]; then
  build_peer volcano volcano.sh/volcano "$VOLCANO_VERSION" \
    "cmd/scheduler:vc-scheduler cmd/controller-manager:vc-controller-manager" "" \
    "config/crd/volcano/bases/*.yaml config/crd/jobflow/bases/*.yaml installer/helm/chart/volcano/config/volcano-scheduler.conf"
fi
if [ "$want" = all ] || [ "$want" = volcano-topology ]; then
  # The proxy refuses volcano.sh/volcano at every v1.11-v1.14 release (403 "This module version
  # is not available"); the line then says BLOCKED and the .blocked file the exact error.
  PEER_LABEL=volcano-topology build_peer volcano volcano.sh/volcano "$VOLCANO_TOPOLOGY_VERSION" \
    "cmd/scheduler:vc-scheduler cmd/controller-manager:vc-controller-manager" "" \
    "config/crd/volcano/bases/*.yaml config/crd/jobflow/bases/*.yaml installer/helm/chart/volcano/config/volcano-scheduler.conf"
fi
if [ "$want" = all ] || [ "$want" = kai ]; then
  # KAI v0.12.0 is served under its first module path (github.com/NVIDIA/KAI-scheduler); the proxy
  # refused every other exact version tried (docs/benchmarks.md, Build notes). Its go.mod has no
  # replace directives; a k8s.io module refused at its pinned version is re-pinned to v0.34.2.
  rm -f "$PEERS_BIN/kai.blocked"  # what the version probe this replaced recorded
  build_peer kai github.com/NVIDIA/KAI-scheduler "$KAI_VERSION" \
    "cmd/scheduler:scheduler cmd/binder:binder cmd/podgroupcontroller:podgroupcontroller cmd/queuecontroller:queuecontroller cmd/admission:admission" "" \
    "deployments/kai-scheduler/crds/*.yaml deployments/kai-scheduler/templates/priorityclasses/*.yaml" v0.34.2
fi
