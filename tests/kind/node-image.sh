#!/usr/bin/env bash
# Make a kind node image locally (no registry): prints its reference on stdout.
#   tests/kind/node-image.sh            # localhost/phalanx-kind-node:<k8s version>
# Needs podman (runc) and root; the Kubernetes binaries come from build-binaries.sh --node plus
# kubeadm, kind and crictl built here (cached by version like the rest).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
# The release kind-config.yaml names; passed on to build-binaries.sh.
export K8S_VERSION="${K8S_VERSION:-v1.35.4}"
KIND_VERSION="${KIND_VERSION:-v0.30.0}"
CRICTL_VERSION="${CRICTL_VERSION:-v1.34.0}"
CACHE="${PHALANX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/phalanx}"
NODE_IMAGE="localhost/phalanx-kind-node:$K8S_VERSION"
KIND_BIN="$CACHE/bin/kind-$KIND_VERSION"
export GOMODCACHE="${GOMODCACHE:-$CACHE/go/mod}" GOCACHE="${GOCACHE:-$CACHE/go/build}"
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=mod
PODMAN=(podman --runtime runc)
LIMITS=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)

say() { printf '[kind-node %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

BIN=$(bash "$REPO/tests/localcluster/build-binaries.sh" --node)
mkdir -p "$KIND_BIN"

# kind itself, kubeadm (same module as the control plane) and crictl (kind load uses it).
[ -x "$KIND_BIN/kind" ] || { say "building kind $KIND_VERSION"; GOBIN="$KIND_BIN" nice -n 10 go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION"; }
if [ ! -x "$KIND_BIN/kubeadm" ]; then
  say "building kubeadm $K8S_VERSION"
  # The version stamp the control plane's binaries carry: build-binaries.sh's k8s_ldflags alone.
  eval "$(sed -n '/^k8s_ldflags() {/,/^}/p' "$REPO/tests/localcluster/build-binaries.sh")"
  declare -F k8s_ldflags >/dev/null || die "k8s_ldflags not found in build-binaries.sh"
  (cd "$CACHE/work/kubernetes-$K8S_VERSION-node" && nice -n 10 go build -trimpath -ldflags "$(k8s_ldflags)" -o "$KIND_BIN/kubeadm" k8s.io/kubernetes/cmd/kubeadm)
fi
if [ ! -x "$KIND_BIN/crictl" ]; then
  say "building crictl $CRICTL_VERSION"
  # The proxy serves this version's module but not its version list, so go install refuses it;
  # its cri-api/cri-client release candidates are not in the checksum database: re-pinned.
  work="$CACHE/work/crictl-$CRICTL_VERSION"; rm -rf "$work"; mkdir -p "$work"
  printf 'module phalanx.local/crictl\n\ngo 1.25.0\n\nrequire (\n\tsigs.k8s.io/cri-tools %s\n\tk8s.io/cri-api v0.34.0\n\tk8s.io/cri-client v0.34.0\n)\n' "$CRICTL_VERSION" >"$work/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "sigs.k8s.io/cri-tools/cmd/crictl"\n' >"$work/tools.go"
  (cd "$work" && GONOSUMDB=sigs.k8s.io/cri-tools go mod tidy -e >/dev/null 2>&1 \
     && GONOSUMDB=sigs.k8s.io/cri-tools nice -n 10 go build -trimpath -ldflags "-s -w" -o "$KIND_BIN/crictl" sigs.k8s.io/cri-tools/cmd/crictl)
fi

ctx="$CACHE/work/kind-node-$K8S_VERSION"
rm -rf "$ctx"; mkdir -p "$ctx/bin" "$ctx/images" "$ctx/kind-files"
kind_src=$(go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
files="$kind_src/images/base/files"
( cd "$files" && cp --parents usr/local/bin/entrypoint etc/systemd/system/kubelet.service \
    etc/systemd/system/kubelet.slice etc/systemd/system/undo-mount-hacks.service \
    etc/systemd/system/kubelet.service.d/10-kubeadm.conf etc/systemd/system/kubelet.service.d/11-kind.conf \
    etc/sysctl.d/10-network-security.conf etc/sysctl.d/10-network-magic.conf etc/default/kubelet etc/crictl.yaml \
    kind/bin/mount-product-files.sh kind/bin/undo-mount-hacks.sh kind/bin/create-kubelet-cgroup-v2.sh "$ctx/kind-files/" )
chmod -R u+w "$ctx/kind-files"
cp "$BIN/kubelet" "$BIN/kubectl" "$KIND_BIN/kubeadm" "$KIND_BIN/crictl" "$ctx/bin/"
cp "$REPO/tests/kind/node/"* "$ctx/"

# The images kubeadm will ask for, made from this project's binaries.
declare -A want
while read -r ref; do want[${ref%%:*}]=$ref; done < <("$KIND_BIN/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null)
sed -i "s#SANDBOX_IMAGE#${want[registry.k8s.io/pause]}#" "$ctx/containerd.toml"
( cd "$REPO" && "$REPO/.venv/bin/python" - "$ctx/images" "$BIN" "${want[registry.k8s.io/kube-apiserver]}" \
    "${want[registry.k8s.io/kube-controller-manager]}" "${want[registry.k8s.io/kube-scheduler]}" \
    "${want[registry.k8s.io/etcd]}" "${want[registry.k8s.io/pause]}" <<'PY'
import sys
from pathlib import Path
from tests.localcluster.realnode import write_binary_image
out, bin_dir, apiserver, kcm, scheduler, etcd, pause = sys.argv[1:]
out, bin_dir = Path(out), Path(bin_dir)
for binary, ref in (("kube-apiserver", apiserver), ("kube-controller-manager", kcm),
                    ("kube-scheduler", scheduler), ("etcd", etcd)):
    write_binary_image(bin_dir / binary, ref, out / f"{binary}.tar", f"/usr/local/bin/{binary}")
write_binary_image(bin_dir / "phalanx-pause", pause, out / "pause.tar", "/pause", ["/pause"])
PY
)
# kube-proxy needs iptables beside it: a Debian image with Debian's iptables.
base=$(podman images --format '{{.Repository}}:{{.Tag}}' | grep -m1 '^localhost/phalanx-base:' ) \
  || die "no localhost/phalanx-base image: run make image first"
proxy_ctx="$ctx/kube-proxy"; mkdir -p "$proxy_ctx"; cp "$BIN/kube-proxy" "$proxy_ctx/"
printf 'ARG BASE\nFROM ${BASE}\nRUN apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends iptables conntrack >/dev/null && rm -rf /var/lib/apt/lists/*\nCOPY kube-proxy /usr/local/bin/kube-proxy\nENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n' >"$proxy_ctx/Containerfile"
"${PODMAN[@]}" build -q "${LIMITS[@]}" --build-arg "BASE=$base" -t "${want[registry.k8s.io/kube-proxy]}" "$proxy_ctx" >/dev/null
"${PODMAN[@]}" save --format docker-archive -o "$ctx/images/kube-proxy.tar" "${want[registry.k8s.io/kube-proxy]}"

say "building $NODE_IMAGE"
"${PODMAN[@]}" build -q "${LIMITS[@]}" --build-arg "BASE=$base" --build-arg "K8S_VERSION=$K8S_VERSION" \
  -t "$NODE_IMAGE" "$ctx" >/dev/null
echo "$NODE_IMAGE"
