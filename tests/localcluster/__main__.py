"""Command line: ``python -m tests.localcluster up|down|status|build``."""

from __future__ import annotations

import argparse
import json
import sys

from tests.localcluster import realnode
from tests.localcluster.autoscaler import Autoscaler, NodeGroup, stop_leftover_autoscaler
from tests.localcluster.binaries import ensure_binaries
from tests.localcluster.cluster import ClusterConfig, LocalCluster, pki_dir
from tests.localcluster.fleet import GPU_SOURCES, GPUS_ALLOCATABLE, FleetSpec
from tests.localcluster.operators import stop_leftover_operators
from tests.localcluster.phalanx import stop_leftovers
from tests.localcluster.versions import ENV, release, supported


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.localcluster", description=__doc__)
    parser.add_argument("command", choices=["up", "down", "status", "build"])
    parser.add_argument("--name", default="phalanx")
    parser.add_argument("--gpu-nodes", type=int, default=8)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--cpu-nodes", type=int, default=2)
    parser.add_argument(
        "--gpus-as",
        choices=GPU_SOURCES,
        default=GPUS_ALLOCATABLE,
        help="where the fake nodes' GPUs come from: node allocatable (nvidia.com/gpu), only DRA "
        "devices (a DeviceClass and one ResourceSlice per node), or DRA devices that the "
        "DeviceClass's extendedResourceName also offers as nvidia.com/gpu",
    )
    parser.add_argument("--scheduler-qps", type=int, default=50)
    parser.add_argument(
        "--k8s-version",
        default=None,
        help=f"the Kubernetes release: {supported()} or a minor (1.37); default: ${ENV}, else the default",
    )
    parser.add_argument(
        "--scheduler-gang-plugin",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run kube-scheduler's own gang plugin (GangScheduling) beside Phalanx (default: as the "
        "release runs it with the Workload API on: from 1.37)",
    )
    parser.add_argument(
        "--real-node",
        action="store_true",
        help="also run a real node (kubelet, containerd, kube-proxy); needs root, see docs/development.md",
    )
    parser.add_argument(
        "--autoscaler",
        action="store_true",
        help="also run the cluster-autoscaler (kwok provider, ProvisioningRequests on) with one GPU "
        "node group of 0..4 nodes x 8 GPUs; see docs/development.md",
    )
    args = parser.parse_args(argv)
    try:
        k8s = release(args.k8s_version)
    except ValueError as err:
        parser.error(str(err))
    if args.command == "build":
        print(ensure_binaries(k8s))
        return 0
    workdir = ClusterConfig().workdir
    fleet = FleetSpec(
        gpu_nodes=args.gpu_nodes,
        gpus_per_node=args.gpus_per_node,
        cpu_nodes=args.cpu_nodes,
        gpus_as=args.gpus_as,
    )
    cluster = LocalCluster(
        ClusterConfig(
            name=args.name,
            workdir=workdir,
            fleet=fleet,
            release=k8s,
            gang_plugin=args.scheduler_gang_plugin,
            scheduler_qps=args.scheduler_qps,
            scheduler_burst=2 * args.scheduler_qps,
            extra_options=realnode.cluster_options() if args.real_node else {},
            extra_component_patches=(
                realnode.cluster_patches(pki_dir(workdir, args.name)) if args.real_node else []
            ),
        )
    )
    node = realnode.RealNode(cluster)
    if args.command == "up":
        cluster.up()
        if args.real_node:
            node.up()
        if args.autoscaler:
            Autoscaler(cluster).ensure(NodeGroup())
        print(f"export KUBECONFIG={cluster.kubeconfig}")
    elif args.command == "down":
        stop_leftovers(cluster.config.workdir)
        stop_leftover_operators(cluster.config.workdir)
        stop_leftover_autoscaler(cluster.config.workdir)
        if node.pid_dir.is_dir():
            node.down()
        cluster.down()
    else:
        json.dump(cluster.status(), sys.stdout, indent=2)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
