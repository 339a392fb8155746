"""`kubectl phalanx` against the real control plane, run as kubectl runs any plugin (found on PATH).

The counterfactual is checked for real: the change `explain` names is applied, and the gang starts.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from controller.core import DEFAULT_LEVELS
from tests import builders
from tests.conftest import NodePool
from tests.e2e.kube import apply, podgroup
from tests.e2e.test_controller import count_bound, pooled_job
from tests.e2e.waiting import eventually, stays
from tests.localcluster import LocalCluster


def kubectl_phalanx(
    cluster: LocalCluster, *args: str, kubeconfig: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`kubectl phalanx ...` with the venv's `kubectl-phalanx` on PATH, as `pip install` puts it;
    ``kubeconfig``: $KUBECONFIG (a path list), else the cluster's."""
    assert cluster.bin_dir is not None
    env = {
        **os.environ,
        "KUBECONFIG": kubeconfig or str(cluster.kubeconfig),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), str(cluster.bin_dir), os.environ["PATH"]]),
    }
    return subprocess.run(
        [str(cluster.bin_dir / "kubectl"), "phalanx", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def as_json(cluster: LocalCluster, *args: str) -> Any:
    result = kubectl_phalanx(cluster, *args, "-o", "json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # stdout is the JSON alone: warnings go to stderr


def eight_gpus_wanted_five_free(cluster: LocalCluster, ns: str, pool: NodePool) -> str:
    """One 8-GPU node with a 3-GPU gang running on it, and an 8-GPU gang waiting."""
    [node] = pool.add(1, gpus=8)
    apply(cluster, ns, pooled_job("low", pool).parallelism(3).build())
    eventually(lambda: count_bound(cluster, ns, "low") == 3, 30, what="low gang running")
    # creationTimestamp has whole seconds: a later second makes "big" the younger gang, behind "low"
    # in the order (in the same second the name would decide).
    time.sleep(1.1)
    apply(cluster, ns, pooled_job("big", pool).parallelism(8).build())
    eventually(
        lambda: podgroup(cluster, ns, "big").get("status", {}).get("reason") == "InsufficientCapacity",
        30,
        what="big gang waiting for capacity",
    )
    return node


def test_explain_names_the_node_to_add_and_adding_it_starts_the_gang(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    ns = gang_namespace
    node = eight_gpus_wanted_five_free(cluster, ns, pool)

    [data] = as_json(cluster, "explain", "job/big", "-n", ns)["gangs"]
    assert data["gang"] == f"{ns}/big"
    assert data["decision"]["reason"] == "InsufficientCapacity"
    assert data["partial"] == {"needed": 8, "placed": 5, "nodes": {node: 5}}
    assert sum(1 for m in data["members"] if m["state"] == "Gated") == 8
    fixes = {f["change"]: f for f in data["fixes"]}
    assert (fixes["FreeOnNode"]["node"], fixes["FreeOnNode"]["amount"]) == (node, 3)
    assert {h["gang"] for h in fixes["FreeOnNode"]["heldBy"]} == {f"{ns}/low"}
    assert (fixes["AddNodes"]["count"], fixes["AddNodes"]["like"]) == (1, node)
    assert [v["name"] for v in fixes["Remove"]["victims"]] == [f"{ns}/low"]

    text = kubectl_phalanx(cluster, "explain", "job/big", "-n", ns)
    assert text.returncode == 0, text.stderr
    assert f"add 1 node like {node}" in text.stdout
    assert "needs 8 pods × 1 nvidia.com/gpu; best placement fits 5" in text.stdout

    # Nothing was written: the gang still waits, whole.
    stays(lambda: count_bound(cluster, ns, "big") == 0, 2.0, what="big gang still waiting")
    pool.add(1, gpus=8)  # the change explain named
    eventually(lambda: count_bound(cluster, ns, "big") == 8, 30, what="big gang started on the new node")


def test_explain_names_the_gang_in_the_way_and_ending_it_starts_the_gang(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    ns = gang_namespace
    eight_gpus_wanted_five_free(cluster, ns, pool)

    rows = yaml.safe_load(kubectl_phalanx(cluster, "top", "-n", ns, "-o", "yaml").stdout)["gangs"]
    assert [(r["name"], r["state"], r["gpusHeld"]) for r in rows] == [
        ("low", "Running", 3),
        ("big", "Pending", 0),
    ]
    assert rows[1]["reason"] == "InsufficientCapacity" and rows[1]["waitingSeconds"] >= 0
    table = kubectl_phalanx(cluster, "top", "-n", ns).stdout
    assert table.splitlines()[0].split()[:3] == ["#", "NAMESPACE", "GANG"]

    [data] = as_json(cluster, "explain", f"pod/{_any_member(cluster, ns, 'big')}", "-n", ns)["gangs"]
    [remove] = [f for f in data["fixes"] if f["change"] == "Remove"]
    [victim] = remove["victims"]
    assert (victim["name"], victim["pods"], victim["lowerPriority"]) == (f"{ns}/low", 3, False)

    cluster.kubectl("delete", "job", "low", "-n", ns, "--wait=false")  # the change explain named
    eventually(lambda: count_bound(cluster, ns, "big") == 8, 30, what="big gang started in the freed room")


def _any_member(cluster: LocalCluster, ns: str, job: str) -> str:
    pods = cluster.kubectl_json("get", "pods", "-n", ns, "-l", f"job-name={job}")["items"]
    name: str = pods[0]["metadata"]["name"]
    return name


def test_audit_flags_what_would_never_start_and_exits_non_zero(
    cluster: LocalCluster, namespace: str, pool: NodePool
) -> None:
    pool.add(1, gpus=8)
    # Not opted in: this Job just runs, on 1 of the 8 GPUs.
    apply(cluster, namespace, pooled_job("busy", pool).parallelism(1).build())
    eventually(lambda: count_bound(cluster, namespace, "busy") == 1, 30, what="busy pod running")
    # Suspended: the audit reads specs; nothing needs to run.
    for name, size in (("fits", 2), ("huge", 12), ("slow", 8)):
        job = pooled_job(name, pool).parallelism(size).suspend().build()
        if name == "slow":
            job["spec"]["activeDeadlineSeconds"] = 600
        apply(cluster, namespace, job)
    apply(cluster, namespace, builders.statefulset("db").replicas(2).build())

    result = kubectl_phalanx(cluster, "audit", "-n", namespace, "-o", "json")
    assert result.returncode == 1, result.stderr
    findings = {(f["workload"], f["check"]): f["severity"] for f in json.loads(result.stdout)["findings"]}
    assert findings[("Job/huge", "NeverFits")] == "error"
    assert findings[("StatefulSet/db", "OrderedReady")] == "warning"
    assert findings[("Job/fits", "WouldStart")] == "info"
    assert findings[("Job/slow", "WouldWait")] == "info"
    assert findings[("Job/slow", "Deadline")] == "warning"
    assert not [k for k, s in findings.items() if k[0] == "Job/fits" and s != "info"]

    cluster.kubectl("delete", "job", "huge", "-n", namespace)
    after = kubectl_phalanx(cluster, "audit", "-n", namespace)
    assert after.returncode == 0, after.stdout + after.stderr
    assert "0 would never start" in after.stdout


# ---- kubectl's flags, and a tenant ------------------------------------------------------------------


def tenant_kubeconfig(cluster: LocalCluster, ns: str, directory: Path) -> Path:
    """A ServiceAccount of ``ns`` with only the shipped phalanx-plugin-reader (cluster-wide) and the
    namespace's ``view``, in a kubeconfig of its own: context "tenant", its CA a file relative to it."""
    name = "plugin-user"
    cluster.kubectl("create", "serviceaccount", name, "-n", ns)
    cluster.kubectl(
        "create", "rolebinding", name, "--clusterrole=view", f"--serviceaccount={ns}:{name}", "-n", ns
    )
    cluster.kubectl(
        "create",
        "clusterrolebinding",
        f"plugin-reader-{ns}",
        "--clusterrole=phalanx-plugin-reader",
        f"--serviceaccount={ns}:{name}",
    )
    token = cluster.kubectl("create", "token", name, "-n", ns, "--duration=1h").stdout.strip()
    admin = cluster.kubectl_json("config", "view", "--raw", "--minify")["clusters"][0]["cluster"]
    (directory / "certs").mkdir(parents=True)
    if admin.get("certificate-authority-data"):
        (directory / "certs" / "ca.crt").write_bytes(base64.b64decode(admin["certificate-authority-data"]))
    else:
        (directory / "certs" / "ca.crt").write_bytes(Path(admin["certificate-authority"]).read_bytes())
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "tenant",  # not used: the admin kubeconfig, listed first, sets one
        "clusters": [
            {
                "name": "tenant-view",
                "cluster": {"server": admin["server"], "certificate-authority": "certs/ca.crt"},
            }
        ],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [
            {"name": "tenant", "context": {"cluster": "tenant-view", "user": name, "namespace": ns}}
        ],
    }
    path = directory / "tenant.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_tenant_with_the_plugin_role_gets_the_controller_s_explanation_via_a_second_context(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, tmp_path: Path
) -> None:
    ns = gang_namespace
    eight_gpus_wanted_five_free(cluster, ns, pool)
    tenant = tenant_kubeconfig(cluster, ns, tmp_path / "tenant")
    merged = os.pathsep.join([str(cluster.kubeconfig), str(tenant)])
    try:
        # The first file's current-context: the admin, who may read everything and so re-plans.
        admin = kubectl_phalanx(cluster, "explain", "job/big", "-n", ns, "-o", "json", kubeconfig=merged)
        assert admin.returncode == 0, admin.stderr
        assert json.loads(admin.stdout)["gangs"][0]["source"] == "planner"

        # --context picks the second file's context: the tenant, whose namespace is its default.
        as_tenant = kubectl_phalanx(cluster, "--context", "tenant", "explain", "job/big", kubeconfig=merged)
        assert as_tenant.returncode == 0, as_tenant.stderr
        assert "Traceback" not in as_tenant.stderr
        assert (
            f"Gang:       {ns}/big (PodGroup podgroups.scheduling.sigs.k8s.io, minMember 8)"
            in as_tenant.stdout
        )
        assert "Controller: Pending InsufficientCapacity: needs 8 pods × 1 nvidia.com/gpu" in as_tenant.stdout
        assert "Warning: you may not read pods.core" in as_tenant.stderr

        data = json.loads(
            kubectl_phalanx(
                cluster, "explain", "job/big", "--context", "tenant", "-o", "json", kubeconfig=merged
            ).stdout
        )
        [gang] = data["gangs"]
        assert (gang["source"], gang["decision"]["reason"]) == ("podGroupStatus", "InsufficientCapacity")
        assert "pods.core" in data["access"]["narrowedToNamespace"]

        # A tenant's -A is refused in one line, and another namespace's object is not theirs to see.
        everything = kubectl_phalanx(cluster, "--context", "tenant", "top", "-A", kubeconfig=merged)
        assert everything.returncode == 3 and everything.stderr.startswith("error: -A needs to read")
        assert "Traceback" not in everything.stderr

        # --as: the admin acting as the tenant gets what the tenant gets.
        impersonated = kubectl_phalanx(
            cluster,
            "explain",
            "job/big",
            "-n",
            ns,
            "-o",
            "json",
            "--as",
            f"system:serviceaccount:{ns}:plugin-user",
        )
        assert impersonated.returncode == 0, impersonated.stderr
        assert json.loads(impersonated.stdout)["gangs"][0]["source"] == "podGroupStatus"
    finally:
        cluster.kubectl("delete", "clusterrolebinding", f"plugin-reader-{ns}", check=False)


def test_not_found_is_kubectl_s_exit_1_and_the_settings_come_from_the_controller_s_args(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    ns = gang_namespace
    missing = kubectl_phalanx(cluster, "explain", "job/nothing", "-n", ns, "-o", "json")
    assert (missing.returncode, missing.stdout) == (1, "")
    assert missing.stderr == 'Error from server (NotFound): jobs.batch "nothing" not found\n'

    # A controller Deployment (scaled to 0: only read) with a flag and an env value.
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "phalanx-controller"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "c"}},
            "template": {
                "metadata": {"labels": {"app": "c"}},
                "spec": {
                    "containers": [
                        {
                            "name": "controller",
                            "image": "localhost/phalanx:0.1.0",
                            "command": ["phalanx-controller"],
                            "args": ["--no-preemption", "--starvation-age-seconds=900"],
                            "env": [
                                {"name": "PHALANX_CONTROLLER_PREEMPTION_MIN_RUNTIME_SECONDS", "value": "120"}
                            ],
                        }
                    ]
                },
            },
        },
    }
    apply(cluster, ns, deployment)
    data = as_json(cluster, "top", "-n", ns, "--controller", f"{ns}/phalanx-controller")
    assert data["settings"]["source"] == f"Deployment {ns}/phalanx-controller"
    assert data["settings"]["values"] == {
        "preemption": {"value": False, "from": "args"},
        "preemption-min-runtime-seconds": {"value": 120.0, "from": "env"},
        "starvation-age-seconds": {"value": 900.0, "from": "args"},
        "default-schedule-timeout-seconds": {"value": None, "from": "default"},
        "topology-levels": {"value": ",".join(DEFAULT_LEVELS), "from": "default"},
        "topologies": {"value": "", "from": "default"},
    }
    text = kubectl_phalanx(cluster, "top", "-n", ns, "--controller", f"{ns}/phalanx-controller").stdout
    assert f"Planner settings from Deployment {ns}/phalanx-controller: preemption false (args)" in text
