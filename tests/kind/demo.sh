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
mkdir -p "$WORK"
start=$(date +%s)

say "building the Phalanx image and the kind node image (cached after the first run)"
bash "$REPO/tests/install/image.sh" --save "$WORK/phalanx.tar" >/dev/null
node_image=$(bash "$REPO/tests/kind/node-image.sh")
# kind's podman provider bind-mounts /lib/modules, which machines without kernel modules lack.
[ -d /lib/modules ] || mkdir -p /lib/modules

"$KIND" delete cluster --name phalanx >/dev/null 2>&1 || true
cleanup() { [ "$KEEP" = 1 ] || "$KIND" delete cluster --name phalanx >/dev/null 2>&1 || true; }
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
