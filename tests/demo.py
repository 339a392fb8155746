"""`make demo`: Phalanx on a local cluster, three gangs competing for 8 GPUs.

A real control plane with two fake 4-GPU nodes, Phalanx's webhook and controller running against
it (installed from deploy/local), and an opted-in namespace where three ordinary Jobs are applied:
two that need 5 GPUs each and one that needs 8. Without gang scheduling the first two would split
the 8 GPUs and deadlock; with Phalanx exactly one gang runs at a time, whole, and the table shows
why the others wait. Run with ``--keep`` to leave everything running afterwards.

``--gpus-as dra`` runs it on GPUs that exist only as DRA devices (a DeviceClass and one
ResourceSlice per node): each pod claims its GPU from a ResourceClaimTemplate instead of asking for
``nvidia.com/gpu``. ``--gpus-as dra-extended`` keeps the plain ``nvidia.com/gpu`` requests, served
from those devices by the DeviceClass's ``extendedResourceName``.
``--autoscaler``: the same cluster with the real cluster-autoscaler beside it (kwok provider, a
node group of 0..4 nodes × 8 GPUs) and Phalanx asking it for capacity (--provisioning-requests):
a 16-GPU gang that fits nowhere gets one ProvisioningRequest, the autoscaler adds two nodes, and the
gang starts whole on them.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from tests import builders
from tests.localcluster import ClusterConfig, FleetSpec, LocalCluster
from tests.localcluster.autoscaler import NODE_GROUP_LABEL, Autoscaler, NodeGroup
from tests.localcluster.fleet import DRA_DEVICE_CLASS, GPU_SOURCES, GPUS_ALLOCATABLE, GPUS_DRA
from tests.localcluster.phalanx import Phalanx, PhalanxOptions

NAMESPACE = "ml-team"


def table(cluster: LocalCluster) -> tuple[str, bool]:
    groups = cluster.kubectl_json("get", "podgroups.scheduling.sigs.k8s.io", "-n", NAMESPACE)["items"]
    pods = cluster.kubectl_json("get", "pods", "-n", NAMESPACE)["items"]
    lines = [f"{'PODGROUP':<10} {'PHASE':<10} {'MIN':>3} {'GATED':>5} {'BOUND':>5} {'DONE':>4}  WHY"]
    done = bool(groups)
    for pg in sorted(groups, key=lambda g: g["metadata"]["name"]):
        name = pg["metadata"]["name"]
        members = [p for p in pods if p["metadata"].get("labels", {}).get("phalanx.io/pod-group") == name]
        gated = sum(1 for p in members if p["spec"].get("schedulingGates"))
        bound = sum(1 for p in members if p["spec"].get("nodeName") and p["status"].get("phase") == "Running")
        finished = sum(1 for p in members if p["status"].get("phase") == "Succeeded")
        status = pg.get("status", {})
        phase = status.get("phase", "-")
        done = done and phase == "Finished"
        lines.append(
            f"{name:<10} {phase:<10} {pg['spec']['minMember']:>3} {gated:>5} {bound:>5} {finished:>4}  "
            f"{status.get('reason', '')}: {status.get('message', '')}"
        )
    return "\n".join(lines), done


def one_gpu_template() -> dict[str, object]:
    """One device of the fleet's DeviceClass per pod."""
    request = {"name": "gpu", "exactly": {"deviceClassName": DRA_DEVICE_CLASS, "count": 1}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep", action="store_true", help="leave the cluster and Phalanx running")
    parser.add_argument("--timeout", type=float, default=150.0)
    parser.add_argument("--gpus-as", choices=GPU_SOURCES, default=GPUS_ALLOCATABLE)
    parser.add_argument(
        "--autoscaler",
        action="store_true",
        help="a gang that fits nowhere grows the cluster through the real cluster-autoscaler",
    )
    args = parser.parse_args(argv)
    fleet = FleetSpec(gpu_nodes=2, gpus_per_node=4, cpu_nodes=1, gpus_as=args.gpus_as)
    cluster = LocalCluster(ClusterConfig(fleet=fleet))
    cluster.up()
    if args.autoscaler:
        return grow(cluster, args.keep, args.timeout)
    phalanx = Phalanx(cluster)
    try:
        phalanx.up()
        print("\n== The fleet: 2 fake GPU nodes × 4 GPUs under a real kube-scheduler ==")
        print(
            cluster.kubectl(
                "get",
                "nodes",
                "-o",
                "custom-columns=NODE:.metadata.name,"
                "GPUS:.status.allocatable.nvidia\\.com/gpu,RACK:.metadata.labels.topology\\.kubernetes\\.io/rack",
            ).stdout
        )
        cluster.kubectl("create", "namespace", NAMESPACE)
        cluster.kubectl("label", "namespace", NAMESPACE, "phalanx.io/gang-scheduling=enabled")
        while cluster.kubectl("get", "sa", "default", "-n", NAMESPACE, check=False).returncode:
            time.sleep(0.1)
        if args.gpus_as == GPUS_DRA:
            print(cluster.kubectl("get", "resourceslices").stdout)
            cluster.apply_objects([one_gpu_template()])
        print(f"== kubectl apply: three ordinary Jobs in namespace {NAMESPACE} (opted in) ==")
        for name, pods, run_for in (("alpha", 5, "12s"), ("bravo", 5, "12s"), ("charlie", 8, "8s")):
            builder = builders.job(name).parallelism(pods).run_for(run_for)
            if args.gpus_as == GPUS_DRA:
                builder.gpus(0).pod_spec(
                    resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
                )
            else:
                builder.gpus(1)
            job = builder.build()
            result = cluster.kubectl(
                "apply",
                "-n",
                NAMESPACE,
                "-f",
                "-",
                input=json.dumps(job),
            )
            print(f"  job {name}: {pods} pods × 1 GPU ({result.stdout.strip()})")
            time.sleep(0.5)
        print("\n== Live: one gang at a time runs whole; the others wait at the gate, saying why ==")
        deadline = time.monotonic() + args.timeout
        last = ""
        done = False
        while time.monotonic() < deadline and not done:
            text, done = table(cluster)
            if text != last:
                print(f"--- t+{args.timeout - (deadline - time.monotonic()):5.1f}s")
                print(text)
                last = text
            time.sleep(1.0)
        print("\nEvents on the PodGroups:")
        print(
            cluster.kubectl(
                "get",
                "events",
                "-n",
                NAMESPACE,
                "--field-selector",
                "involvedObject.kind=PodGroup",
                "--sort-by=.firstTimestamp",  # the story in order, not by event name
                "-o",
                "custom-columns=OBJECT:.involvedObject.name,REASON:.reason,MESSAGE:.message",
            ).stdout
        )
        print(
            "all three gangs finished; no GPU was ever held by a partial gang" if done else "demo timed out"
        )
        return 0 if done else 1
    finally:
        if args.keep:
            print(f"left running: export KUBECONFIG={cluster.kubeconfig}; `make cluster-down` stops it")
        else:
            phalanx.down()
            cluster.down()


def _provisioned(request: dict[str, object]) -> str:
    status = request.get("status")
    conditions = status.get("conditions", []) if isinstance(status, dict) else []
    found = [c for c in conditions if c.get("type") == "Provisioned"]
    return f"Provisioned={found[0]['status']}" if found else "not answered yet"


def grow(cluster: LocalCluster, keep: bool, timeout: float) -> int:
    """A 16-GPU gang on two 4-GPU nodes: it asks the cluster-autoscaler for two 8-GPU nodes."""
    group = NodeGroup(name="gpu-pool", min_size=0, max_size=4, gpus=8)
    options = PhalanxOptions()
    options.controller_env["PHALANX_CONTROLLER_PROVISIONING_REQUESTS"] = "best-effort-atomic"
    autoscaler = Autoscaler(cluster)
    phalanx = Phalanx(cluster, options)
    try:
        autoscaler.ensure(group)
        phalanx.up()
        cluster.kubectl("create", "namespace", NAMESPACE)
        cluster.kubectl("label", "namespace", NAMESPACE, "phalanx.io/gang-scheduling=enabled")
        while cluster.kubectl("get", "sa", "default", "-n", NAMESPACE, check=False).returncode:
            time.sleep(0.1)
        print("\n== kubectl apply: a Job of 2 pods × 8 GPUs; the fleet's nodes have 4 GPUs each ==")
        job = builders.job("big").parallelism(2).gpus(8).node_selector({NODE_GROUP_LABEL: group.name})
        cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(job.run_for("20s").build()))
        deadline = time.monotonic() + timeout
        last = ""
        done = False
        while time.monotonic() < deadline and not done:
            text, done = table(cluster)
            nodes = autoscaler.nodes(group.name)
            requests = ", ".join(
                f"{item['metadata']['name']} ({_provisioned(item)})"
                for item in cluster.kubectl_json("get", "provisioningrequests", "-n", NAMESPACE)["items"]
            )
            view = f"{text}\nProvisioningRequest: {requests or '-'}\nnodes added: {', '.join(nodes) or '-'}"
            if view != last:
                print(f"--- t+{timeout - (deadline - time.monotonic()):5.1f}s")
                print(view)
                last = view
            time.sleep(1.0)
        print("the gang grew the cluster and ran whole" if done else "demo timed out")
        return 0 if done else 1
    finally:
        if keep:
            print(f"left running: export KUBECONFIG={cluster.kubeconfig}; `make cluster-down` stops it")
        else:
            phalanx.down()
            autoscaler.down()
            cluster.down()


if __name__ == "__main__":
    sys.exit(main())
