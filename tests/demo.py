"""`make demo`: a local cluster with fake GPU nodes and the gate mechanism Phalanx builds on.

Run with ``--keep`` to leave the cluster running afterwards (``make cluster-down`` stops it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from tests.localcluster import LocalCluster


def _table(cluster: LocalCluster) -> None:
    print(
        cluster.kubectl(
            "get",
            "nodes",
            "-L",
            "nvidia.com/gpu.product,topology.kubernetes.io/zone,topology.kubernetes.io/rack",
            "-o",
            "custom-columns=NODE:.metadata.name,GPUS:.status.allocatable.nvidia\\.com/gpu,"
            "CPU:.status.allocatable.cpu,MEMORY:.status.allocatable.memory,"
            "ZONE:.metadata.labels.topology\\.kubernetes\\.io/zone,RACK:.metadata.labels.topology\\.kubernetes\\.io/rack",
        ).stdout
    )


def _pod_line(cluster: LocalCluster, ns: str, name: str) -> str:
    pod = cluster.kubectl_json("get", "pod", name, "-n", ns)
    scheduled = next((c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"), {})
    return (
        f"  {name}: phase={pod['status'].get('phase')} node={pod['spec'].get('nodeName') or '-'} "
        f"gates={[g['name'] for g in pod['spec'].get('schedulingGates', [])]} "
        f"PodScheduled={scheduled.get('status', '-')}/{scheduled.get('reason', '-')}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    args = parser.parse_args(argv)
    cluster = LocalCluster()
    cluster.up()
    try:
        print("\n== The fleet: fake GPU nodes run by KWOK under a real kube-scheduler ==")
        _table(cluster)
        ns = "demo"
        cluster.kubectl("create", "namespace", ns)
        while cluster.kubectl("get", "sa", "default", "-n", ns, check=False).returncode:
            time.sleep(0.1)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "trainer-0"},
            "spec": {
                "schedulingGates": [{"name": "phalanx.io/gang"}],
                "containers": [
                    {"name": "main", "image": "pytorch", "resources": {"limits": {"nvidia.com/gpu": "4"}}}
                ],
            },
        }
        print("== A pod held at the scheduling gate phalanx.io/gang: the scheduler leaves it alone ==")
        cluster.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(pod))
        time.sleep(2)
        print(_pod_line(cluster, ns, "trainer-0"))
        print("\n== Lifting the gate (what Phalanx does for a whole gang at once) ==")
        cluster.kubectl(
            "patch",
            "pod",
            "trainer-0",
            "-n",
            ns,
            "--type=json",
            "-p",
            json.dumps([{"op": "remove", "path": "/spec/schedulingGates"}]),
        )
        for _ in range(60):
            line = _pod_line(cluster, ns, "trainer-0")
            if "phase=Running" in line:
                break
            time.sleep(0.25)
        print(line)
        print()
    finally:
        if args.keep:
            print(
                f"cluster left running: export KUBECONFIG={cluster.kubeconfig}; `make cluster-down` stops it"
            )
        else:
            cluster.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
