"""The release on a cluster where another project already serves scheduler-plugins' PodGroup group.

The tests run in file order on one cluster: the release applied beside the other CRD, Helm's rule
for it, then Phalanx running with the PodGroups that CRD serves.

Its own small cluster: CRDs are cluster-scoped, and the session's cluster serves Phalanx's own
``podgroups.scheduling.sigs.k8s.io``, which this test must replace with another project's.
``kubectl phalanx preflight`` names the conflict; the release applied the documented way (the
files preflight lists, ``kubectl apply --server-side -f``) leaves that CRD exactly as it was.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.release import chart, manifests
from tests import builders
from tests.conftest import _namespace
from tests.e2e.kube import apply, bound, gated, podgroup, pods
from tests.e2e.test_kubectl_phalanx import kubectl_phalanx
from tests.e2e.waiting import eventually
from tests.localcluster import LocalCluster
from tests.localcluster.cluster import ClusterConfig
from tests.localcluster.fleet import FleetSpec
from tests.localcluster.phalanx import Phalanx, PhalanxOptions

FOREIGN = Path(__file__).with_name("manifests") / "foreign" / "podgroups.scheduling.sigs.k8s.io.yaml"
FOREIGN_NAME = "podgroups.scheduling.sigs.k8s.io"
HELM_SCRIPT = Path(__file__).resolve().parents[1] / "localcluster" / "build-helm.sh"
# A cluster of its own starts (and may start twice) inside the first test.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def bare_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A second control plane with one fake node and no Phalanx at all."""
    cluster = LocalCluster(
        ClusterConfig(
            name="phalanx-release",
            workdir=tmp_path_factory.mktemp("release-cluster"),
            fleet=FleetSpec(gpu_nodes=1, cpu_nodes=0),
        )
    )
    try:
        cluster.up()
        yield cluster
    finally:
        cluster.down()


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, manifests.Manifests]:
    out = tmp_path_factory.mktemp("dist")
    built = manifests.build()
    manifests.write(built, out)
    chart.write(built, out)
    return out, built


def _crd(cluster: LocalCluster) -> dict[str, Any]:
    obj: dict[str, Any] = cluster.kubectl_json("get", "crd", FOREIGN_NAME)
    return obj


def _untouched_view(crd: dict[str, Any]) -> dict[str, Any]:
    meta = crd["metadata"]
    return {
        "resourceVersion": meta["resourceVersion"],
        "generation": meta["generation"],
        "labels": meta.get("labels"),
        "annotations": meta.get("annotations"),
        "spec": crd["spec"],
    }


def test_release_leaves_another_projects_podgroup_crd_untouched(
    bare_cluster: LocalCluster, dist: tuple[Path, manifests.Manifests]
) -> None:
    out, built = dist
    bare_cluster.kubectl("create", "-f", str(FOREIGN))
    bare_cluster.kubectl("wait", "--for=condition=Established", f"crd/{FOREIGN_NAME}", timeout=60)
    before = _untouched_view(_crd(bare_cluster))
    assert "PreScheduling" in json.dumps(before["spec"])

    # Preflight first, as the install guide says: it names the conflict and what to apply.
    result = kubectl_phalanx(bare_cluster, "preflight", "-o", "json")
    assert result.returncode == 0, result.stderr  # a conflict Phalanx works around does not block
    verdict = json.loads(result.stdout)
    conflicts = [f for f in verdict["findings"] if f["level"] == "conflict" and f["subject"] == FOREIGN_NAME]
    assert conflicts and "another project's CRD" in conflicts[0]["message"], verdict
    assert verdict["apply"] == [f"phalanx-{built.version}.yaml"]
    table = kubectl_phalanx(bare_cluster, "preflight").stdout
    assert f"CONFLICT  {FOREIGN_NAME}: served by another project's CRD" in table

    for name in verdict["apply"]:
        bare_cluster.kubectl("apply", "--server-side", "-f", str(out / name), timeout=120)

    after = _crd(bare_cluster)
    assert _untouched_view(after) == before
    assert "kubectl" not in {m["manager"] for m in after["metadata"].get("managedFields", [])}
    # Phalanx's own API is installed beside it.
    queues = bare_cluster.kubectl_json("get", "crd", "queues.scheduling.phalanx.io")
    assert queues["metadata"]["labels"]["app.kubernetes.io/name"] == "phalanx"
    names = bare_cluster.kubectl_json("get", "deployments", "-n", "phalanx-system")["items"]
    assert sorted(d["metadata"]["name"] for d in names) == ["phalanx-controller", "phalanx-webhook"]


def _helm() -> str:
    found = shutil.which("helm")
    if found:
        return found
    result = subprocess.run(
        ["bash", str(HELM_SCRIPT)], capture_output=True, text=True, check=False, timeout=1800
    )
    if result.returncode != 0:
        pytest.skip(f"helm could not be built: {result.stderr.strip()[-300:]}")
    return result.stdout.strip().splitlines()[-1]


def test_the_chart_skips_or_refuses_another_projects_crd(
    bare_cluster: LocalCluster, dist: tuple[Path, manifests.Manifests]
) -> None:
    """Helm's lookup against the cluster (``--dry-run=server``) applies preflight's rule."""
    out, built = dist
    if bare_cluster.kubectl("get", "crd", FOREIGN_NAME, check=False).returncode != 0:
        bare_cluster.kubectl("create", "-f", str(FOREIGN))
    helm = _helm()
    # `helm template` assumes its own Kubernetes version unless told; lookup asks the cluster.
    server = bare_cluster.kubectl_json("version")["serverVersion"]["gitVersion"]
    chart_file = str(out / f"phalanx-{built.version}.tgz")
    base = [helm, "template", "phalanx", chart_file, "--dry-run=server", "--kube-version", server]
    env = {"KUBECONFIG": str(bare_cluster.kubeconfig), "HOME": str(out), "PATH": "/usr/bin:/bin"}
    rendered = subprocess.run(base, capture_output=True, text=True, env=env, check=False, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    crds = [
        doc["metadata"]["name"]
        for doc in yaml.safe_load_all(rendered.stdout)
        if doc and doc["kind"] == "CustomResourceDefinition"
    ]
    assert crds == ["queues.scheduling.phalanx.io"]
    forced = subprocess.run(
        [*base, "--set", "compat.schedulingSigsK8s=true"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert forced.returncode != 0
    assert f"{FOREIGN_NAME}: served by another project's CRD; Phalanx never replaces it" in forced.stderr


def test_phalanx_gangs_live_in_the_other_projects_podgroups(bare_cluster: LocalCluster) -> None:
    """Phalanx (webhook and controller, deploy/local without its own PodGroup CRD) admits a gang
    whose PodGroup the other project's CRD serves, and that CRD is still not written."""
    if bare_cluster.kubectl("get", "crd", FOREIGN_NAME, check=False).returncode != 0:
        bare_cluster.kubectl("create", "-f", str(FOREIGN))
    before = _untouched_view(_crd(bare_cluster))
    phalanx = Phalanx(bare_cluster, PhalanxOptions(leave_crds=frozenset({FOREIGN_NAME})))
    try:
        phalanx.up()
        namespaces = _namespace(bare_cluster, "gang", {"phalanx.io/gang-scheduling": "enabled"})
        ns = next(namespaces)
        apply(bare_cluster, ns, builders.job("pair").parallelism(2).gpus(4).build())

        def admitted() -> bool:
            members = pods(bare_cluster, ns, "job-name=pair")
            return len(members) == 2 and all(bound(p) and not gated(p) for p in members)

        eventually(admitted, timeout=90, what="the gang admitted through the other project's PodGroups")
        group = eventually(
            lambda: (
                podgroup(bare_cluster, ns, "pair").get("status", {}).get("phase") == "Running"
                and podgroup(bare_cluster, ns, "pair")
            ),
            timeout=60,
            what="the PodGroup Running",
        )
        assert group["spec"]["minMember"] == 2
        # Their schema keeps phase and counts, and prunes what it does not know (preflight says so).
        assert "reason" not in group["status"]
        next(namespaces, None)
    finally:
        phalanx.down()
    assert _untouched_view(_crd(bare_cluster)) == before
