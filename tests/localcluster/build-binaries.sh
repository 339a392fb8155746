#!/usr/bin/env bash
# Build the upstream control-plane binaries Phalanx is tested against, from the Go module
# proxy only, into a cache outside the repository keyed by version. Idempotent: a component
# whose binaries are already cached is skipped, so a warm run takes well under a second.
#
#   tests/localcluster/build-binaries.sh            # build what is missing, print the bin dir
#   K8S_VERSION=v1.37.2 tests/localcluster/build-binaries.sh   # another supported release
#   PHALANX_CACHE=/somewhere tests/localcluster/build-binaries.sh
#   tests/localcluster/build-binaries.sh --node     # also kubelet and kube-proxy (a real node)
set -euo pipefail

# The release: K8S_VERSION, else the local cluster's ($PHALANX_K8S_VERSION or its default).
K8S_VERSION="${K8S_VERSION:-$(python3 "$(dirname "${BASH_SOURCE[0]}")/versions.py" current)}"
[ -n "$K8S_VERSION" ] || exit 1
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
BUILD_NAME=build-binaries
# shellcheck source=tests/localcluster/goenv.sh
source "$(dirname "${BASH_SOURCE[0]}")/goenv.sh"
BIN="$CACHE/bin/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION"


# The Go each release's go.mod declares: 1.25 for 1.35, 1.26 from 1.36.
k8s_minor=$(echo "$K8S_VERSION" | sed -E 's/^v1\.([0-9]+).*/\1/')
go_needed=$([ "${k8s_minor:-0}" -ge 36 ] && echo 26 || echo 25)
command -v go >/dev/null || die "Go is not installed (need Go >= 1.$go_needed on PATH); it is only a build tool for the upstream components"
go_minor=$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')
[ "${go_minor:-0}" -ge "$go_needed" ] || die "Go $(go env GOVERSION) is too old: Kubernetes ${K8S_VERSION} needs Go >= 1.$go_needed"
mkdir -p "$BIN" "$GOMODCACHE" "$GOCACHE"

have() { for b in "$@"; do [ -x "$BIN/$b" ] || return 1; done; }

check_proxy() {
  # Fail fast and clearly when the proxy cannot be reached instead of a long go-mod stack trace.
  if ! go list -m -json "k8s.io/kubernetes@$K8S_VERSION" >/dev/null 2>"$CACHE/proxy-check.log"; then
    die "cannot reach the Go module proxy ($GOPROXY) for k8s.io/kubernetes@$K8S_VERSION: $(tail -n 3 "$CACHE/proxy-check.log")"
  fi
}

# A throwaway module that requires $1@$2 and replaces each module in $3 (space separated
# "module=>version" pairs) -- the way to build a module whose go.mod uses local replaces.
make_module() {
  local dir=$1 name=$2 module=$3 version=$4 godebug=$5 replaces=$6
  rm -rf "$dir"; mkdir -p "$dir"
  {
    echo "module $name"
    echo
    echo "go 1.25.0"
    [ -n "$godebug" ] && echo "$godebug"
    echo
    echo "require $module $version"
    echo
    for r in $replaces; do echo "replace ${r%%=>*} => ${r%%=>*} ${r##*=>}"; done
  } >"$dir/go.mod"
}

# Stamp the version so /version and the kubelet's node status report it.
k8s_ldflags() {
  local minor=${K8S_VERSION#v1.} ldflags="-s -w"; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$ldflags"
}

build_kubernetes() {
  have kube-apiserver kube-controller-manager kube-scheduler kubectl && { say "kubernetes $K8S_VERSION: cached"; return; }
  check_proxy
  local staging_version="v0.${K8S_VERSION#v1.}" work="$CACHE/work/kubernetes-$K8S_VERSION"
  local upstream_mod replaces="" godebug
  upstream_mod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -f "$upstream_mod" ] || die "could not read go.mod of k8s.io/kubernetes@$K8S_VERSION"
  for m in $(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$upstream_mod"); do
    replaces="$replaces $m=>$staging_version"
  done
  godebug=$(grep -m1 '^godebug ' "$upstream_mod" || true)
  # Each release names the Go it needs (1.37: go 1.26.0); say so before a long failing build.
  local need_go; need_go=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$upstream_mod" | head -n 1)
  if [ -n "$need_go" ] && [ "$(printf '%s\n%s\n' "$need_go" "$(go env GOVERSION | sed 's/^go//')" | sort -V | head -n 1)" != "$need_go" ]; then
    die "Kubernetes $K8S_VERSION needs Go >= $need_go; $(go env GOVERSION) is installed"
  fi
  make_module "$work" phalanx.local/k8s-build k8s.io/kubernetes "$K8S_VERSION" "$godebug" "$replaces"
  cat >"$work/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubectl/pkg/cmd"
)
GO
  say "kubernetes $K8S_VERSION: resolving modules (first run downloads ~300 MB from the proxy)"
  (cd "$work" && go mod tidy -e >/dev/null 2>"$work/tidy.log") || { tail -n 20 "$work/tidy.log" >&2; die "go mod tidy failed for kubernetes"; }
  local ldflags; ldflags=$(k8s_ldflags)
  for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    [ -x "$BIN/$cmd" ] && { say "  $cmd: cached"; continue; }
    say "  building $cmd (cold: 5-15 minutes each on 2 cores, later ones reuse the compiled packages)"
    (cd "$work" && go build -trimpath -ldflags "$ldflags" -o "$BIN/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd") \
      || die "go build of $cmd failed"
    mv "$BIN/$cmd.tmp" "$BIN/$cmd"
    say "  $cmd: done"
  done
}

# kubelet and kube-proxy for the opt-in real node (tests/localcluster/realnode.py), from the same
# module versions as the control plane, so the compiled packages are shared with it.
build_node() {
  have kubelet kube-proxy && { say "kubelet/kube-proxy $K8S_VERSION: cached"; return; }
  local control_plane="$CACHE/work/kubernetes-$K8S_VERSION" work="$CACHE/work/kubernetes-$K8S_VERSION-node"
  [ -f "$control_plane/go.sum" ] || die "the kubernetes build module is missing; run without --node first"
  # A copy of the control plane's resolved module: same versions, its own directory, so this
  # never rewrites the go.mod a control-plane build is using.
  rm -rf "$work"; mkdir -p "$work"
  cp "$control_plane/go.mod" "$control_plane/go.sum" "$work/"
  cat >"$work/node-tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
GO
  say "kubelet/kube-proxy $K8S_VERSION: resolving modules"
  (cd "$work" && go mod tidy -e >/dev/null 2>"$work/tidy-node.log") || { tail -n 20 "$work/tidy-node.log" >&2; die "go mod tidy failed for kubelet"; }
  local ldflags; ldflags=$(k8s_ldflags)
  for cmd in kubelet kube-proxy; do
    [ -x "$BIN/$cmd" ] && continue
    say "  building $cmd"
    (cd "$work" && go build -trimpath -ldflags "$ldflags" -o "$BIN/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd") \
      || die "go build of $cmd failed"
    mv "$BIN/$cmd.tmp" "$BIN/$cmd"
    say "  $cmd: done"
  done
}

# The pod sandbox ("pause") container's process: sleeps until told to stop. No registry serves
# registry.k8s.io/pause here, so the real node's containerd runs this one (static, CGO off).
build_pause() {
  have phalanx-pause && return
  local work="$CACHE/work/pause"
  rm -rf "$work"; mkdir -p "$work"
  printf 'module phalanx.local/pause\n\ngo 1.25.0\n' >"$work/go.mod"
  cat >"$work/main.go" <<'GO'
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
GO
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$BIN/phalanx-pause" .) || die "go build of the pause binary failed"
}

build_etcd() {
  have etcd && { say "etcd $ETCD_VERSION: cached"; return; }
  check_proxy
  local work="$CACHE/work/etcd-$ETCD_VERSION" upstream_mod replaces=""
  upstream_mod=$(go mod download -json "go.etcd.io/etcd/server/v3@$ETCD_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  [ -f "$upstream_mod" ] || die "could not read go.mod of etcd $ETCD_VERSION"
  for m in $(sed -n 's#^\s*\(go.etcd.io/etcd/[a-z0-9/]*\) => \.\./.*#\1#p' "$upstream_mod"); do
    replaces="$replaces $m=>$ETCD_VERSION"
  done
  make_module "$work" phalanx.local/etcd-build go.etcd.io/etcd/server/v3 "$ETCD_VERSION" "" "$replaces"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3/etcdmain"\n' >"$work/tools.go"
  say "etcd $ETCD_VERSION: resolving modules"
  (cd "$work" && go mod tidy -e >/dev/null 2>"$work/tidy.log") || { tail -n 20 "$work/tidy.log" >&2; die "go mod tidy failed for etcd"; }
  # etcd's main package lives in the server module's root directory.
  cat >"$work/main.go" <<'GO'
package main

import "go.etcd.io/etcd/server/v3/etcdmain"
import "os"

func main() { etcdmain.Main(os.Args) }
GO
  say "  building etcd"
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" .) || die "go build of etcd failed"
  mv "$BIN/etcd.tmp" "$BIN/etcd"
  say "  etcd: done"
}

build_kwok() {
  have kwok kwokctl && [ -f "$BIN/kwok-stages/pod-ready.yaml" ] && { say "kwok $KWOK_VERSION: cached"; return; }
  check_proxy
  say "kwok $KWOK_VERSION: building kwok and kwokctl"
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w" \
    "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION" \
    || die "go install of kwok $KWOK_VERSION failed"
  # The stock stages ship in the kwok module; the launcher combines them with its own
  # pod-complete stage (supplying any stage replaces all of kwokctl's defaults).
  local src
  src=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  mkdir -p "$BIN/kwok-stages"
  cp "$src/kustomize/stage/node/fast/node-initialize.yaml" \
     "$src/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
     "$src/kustomize/stage/pod/fast/pod-ready.yaml" \
     "$src/kustomize/stage/pod/fast/pod-delete.yaml" "$BIN/kwok-stages/"
  chmod 0644 "$BIN/kwok-stages/"*.yaml
  say "  kwok: done"
}

start=$(date +%s)
build_kwok
build_etcd
build_kubernetes
if [ "${1:-}" = "--node" ]; then build_node; build_pause; fi
say "all binaries ready in $BIN ($(( $(date +%s) - start ))s)"
echo "$BIN"
