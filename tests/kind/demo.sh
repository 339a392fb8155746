#!/usr/bin/env bash
# make kind-demo: the real install (kubectl apply -k deploy/default, unchanged) on a kind cluster
# made without any registry, then three GPU gangs admitted one whole gang at a time.
#   tests/kind/demo.sh [--keep]     # --keep leaves the kind cluster running
# Needs root, podman with runc, Go (kind, kubeadm, crictl are built and cached like the rest).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
CACHE="${PHALANX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/phalanx}"
KIND="$CACHE/bin/kind-${KIND_VERSION:-v0.30.0}/kind"
WORK="$REPO/.local/kind"
export KUBECONFIG="$WORK/kubeconfig"
# kind's podman provider passes no runtime or ulimit flags: this file supplies them.
export CONTAINERS_CONF="$REPO/tests/kind/containers.conf" KIND_EXPERIMENTAL_PROVIDER=podman
KEEP=0; [ "${1:-}" = "--keep" ] && KEEP=1
NS=kind-demo
GPUS=8

say() { printf '[kind-demo %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# What kind's podman provider needs here, said before anything is built.
[ "$(id -u)" = 0 ] || die "needs root: kind's podman provider runs rootful containers (systemd, containerd and the kubelet inside)"
command -v podman >/dev/null || die "needs podman (Debian: apt-get install podman runc)"
command -v runc >/dev/null || die "needs runc beside podman (Debian: apt-get install runc): crun refuses hybrid cgroups"
command -v go >/dev/null || die "needs Go >= 1.25 on PATH to build kind, kubeadm and crictl from the Go module proxy"
mkdir -p "$WORK"
start=$(date +%s)

# The node's Kubernetes release is the one kind-config.yaml names; kubectl is this project's build
# of it (the one on PATH may be too old, or missing).
export K8S_VERSION; K8S_VERSION=$(sed -n 's/.*phalanx-kind-node:\(v[0-9.]*\).*/\1/p' "$REPO/tests/kind/kind-config.yaml")
PATH="$(bash "$REPO/tests/localcluster/build-binaries.sh"):$PATH"

say "building the Phalanx image and the kind node image (cached after the first run)"
bash "$REPO/tests/install/image.sh" --save "$WORK/phalanx.tar" >/dev/null
node_image=$(bash "$REPO/tests/kind/node-image.sh")
# kind's podman provider bind-mounts /lib/modules, which machines without kernel modules lack.
[ -d /lib/modules ] || mkdir -p /lib/modules

"$KIND" delete cluster --name phalanx >/dev/null 2>&1 || true
cleanup() {
  [ "$KEEP" = 1 ] && return
  "$KIND" delete cluster --name phalanx >/dev/null 2>&1 || true
  # kind leaves its network behind; remove it unless another kind cluster still uses it.
  podman network rm kind >/dev/null 2>&1 || true
  rm -f "$WORK/phalanx.tar"
}
trap cleanup EXIT
say "creating the kind cluster ($node_image, podman provider)"
"$KIND" create cluster --config "$REPO/tests/kind/kind-config.yaml" --kubeconfig "$KUBECONFIG" >/dev/null
# kind load docker-image calls the docker CLI; an archive works with any engine.
"$KIND" load image-archive "$WORK/phalanx.tar" --name phalanx

say "installing Phalanx: kubectl apply -k deploy/default"
kubectl apply -k "$REPO/deploy/default" >/dev/null
kubectl wait -n phalanx-system --for=condition=Available deployment --all --timeout=300s
kubectl get pods -n phalanx-system -o wide

# The kind node has no GPUs: advertise some, as extended resources are advertised by hand.
node=$(kubectl get nodes -o jsonpath='{.items[0].metadata.name}')
kubectl patch node "$node" --subresource=status --type=json \
  -p "[{\"op\":\"add\",\"path\":\"/status/capacity/nvidia.com~1gpu\",\"value\":\"$GPUS\"}]" >/dev/null
# The kubelet derives allocatable from capacity at its next status update: gangs applied before
# that would be told no node can ever hold them.
gpus_allocatable() { kubectl get node "$node" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}'; }
for _ in $(seq 1 60); do [ "$(gpus_allocatable)" = "$GPUS" ] && break; sleep 1; done
[ "$(gpus_allocatable)" = "$GPUS" ] || die "the kubelet never made the $GPUS GPUs allocatable on $node"
kubectl create namespace "$NS" >/dev/null
kubectl label namespace "$NS" phalanx.io/gang-scheduling=enabled >/dev/null
until kubectl get sa default -n "$NS" >/dev/null 2>&1; do sleep 1; done

job() { # name pods gpus-per-pod seconds
  cat <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: $1, namespace: $NS}
spec:
  parallelism: $2
  completions: $2
  template:
    spec:
      restartPolicy: Never
      terminationGracePeriodSeconds: 0
      containers:
        - name: train
          image: localhost/phalanx:0.1.0
          imagePullPolicy: Never
          command: [python, -c, "import time; time.sleep($4)"]
          resources:
            limits: {nvidia.com/gpu: "$3"}
            requests: {cpu: 10m, memory: 32Mi}
---
YAML
}
say "applying three gangs to $NS: 5 x 1 GPU, 5 x 1 GPU, 2 x 4 GPUs on a node with $GPUS GPUs"
{ job gang-a 5 1 15; job gang-b 5 1 15; job gang-c 2 4 15; } | kubectl apply -f - >/dev/null
for _ in $(seq 1 60); do
  kubectl get pg -n "$NS" 2>/dev/null | sed 's/^/  /'
  complete=$(kubectl get jobs -n "$NS" -o jsonpath='{range .items[?(@.status.completionTime)]}{.metadata.name}{"\n"}{end}' | grep -c . || true)
  [ "$complete" = 3 ] && break
  sleep 5
done
kubectl wait -n "$NS" --for=condition=Complete job --all --timeout=10s
say "events:"
kubectl get events -n "$NS" --field-selector involvedObject.kind=PodGroup --sort-by=.lastTimestamp | sed 's/^/  /' | tail -20
say "done in $(( $(date +%s) - start ))s"
