"""A real Kubernetes control plane on this machine, without containers.

kube-apiserver, etcd, kube-controller-manager and kube-scheduler run as processes (built from the
Go module proxy by ``build-binaries.sh``), started by ``kwokctl --runtime binary``; KWOK fakes the
kubelets of a fleet of GPU nodes. Usable from tests (``LocalCluster``) and from the command line
(``python -m tests.localcluster up|down|status``).
"""

from tests.localcluster import procs
from tests.localcluster.cluster import ClusterConfig, LocalCluster
from tests.localcluster.fleet import FleetSpec

__all__ = ["ClusterConfig", "FleetSpec", "LocalCluster", "procs"]
