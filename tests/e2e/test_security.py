"""Tenants who push on the gate, and a controller that may touch only what it must
(docs/operations.md, "Security").

Tenants are ServiceAccounts bound to the built-in ``edit``/``view`` roles in their namespace, and
act through impersonation (``kubectl --as``), as the API server authorises them for real.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import builders
from tests.conftest import NodePool
from tests.e2e.kube import GROUP_LABEL, apply, bound, events, gated, pods
from tests.e2e.test_controller import count_bound, members, pooled_job
from tests.e2e.waiting import eventually, stays
from tests.localcluster import LocalCluster
from tests.localcluster.cluster import REPO
from tests.localcluster.phalanx import NAMESPACE, Phalanx

NODE_NAME_COMPONENT = REPO / "deploy" / "components" / "node-name-policy"

CONTROLLER = f"system:serviceaccount:{NAMESPACE}:phalanx-controller"
PODGROUPS = "podgroups.scheduling.sigs.k8s.io"
REMOVE_GATES = json.dumps([{"op": "remove", "path": "/spec/schedulingGates"}])
LIFT_GATE = json.dumps({"spec": {"schedulingGates": [{"$patch": "delete", "name": "phalanx.io/gang"}]}})


def tenant(cluster: LocalCluster, namespace: str, role: str = "edit") -> list[str]:
    """A ServiceAccount with the built-in ``role`` in ``namespace``; returns kubectl's ``--as`` args."""
    name = f"{role}-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "serviceaccount", name, "-n", namespace)
    cluster.kubectl(
        "create",
        "rolebinding",
        name,
        f"--clusterrole={role}",
        f"--serviceaccount={namespace}:{name}",
        "-n",
        namespace,
    )
    return ["--as", f"system:serviceaccount:{namespace}:{name}"]


def refused(result: Any, message: str) -> bool:
    return bool(result.returncode != 0 and message in result.stderr)


def waiting_gang(cluster: LocalCluster, namespace: str, pool: NodePool, name: str) -> list[dict[str, Any]]:
    """A Job of 4 members needing 16 GPUs where the pool has 8: gated, and never admitted."""
    pool.add(1, gpus=8)
    apply(cluster, namespace, pooled_job(name, pool).parallelism(4).gpus(4).build())

    def all_gated() -> list[dict[str, Any]] | None:
        got = members(cluster, namespace, name)
        return got if len(got) == 4 and all(map(gated, got)) else None

    return eventually(all_gated, 30, what="4 gated members")


# ---- item 9: only Phalanx lifts the gate, and a member bound without it is reported -------------


def test_nobody_but_phalanx_can_remove_the_gang_gate_but_a_cluster_admin_breaking_glass(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    as_tenant = tenant(cluster, gang_namespace)
    as_admin = tenant(cluster, gang_namespace, role="admin")  # the namespace's admin, not the cluster's
    waiting = waiting_gang(cluster, gang_namespace, pool, "toobig")
    name = waiting[0]["metadata"]["name"]
    patch = ("patch", "pod", name, "-n", gang_namespace, "--type=json", "-p", REMOVE_GATES)
    for who in (as_tenant, as_admin):
        result = cluster.kubectl(*patch, *who, check=False)
        assert refused(result, "only Phalanx may remove the phalanx.io/gang scheduling gate"), result.stderr
    # The tenant still edits its pods otherwise: the policy guards the gate, nothing more.
    cluster.kubectl("label", "pod", name, "-n", gang_namespace, "note=mine", *as_tenant)
    stays(lambda: count_bound(cluster, gang_namespace, "toobig") == 0, 3.0, what="nothing bound")
    # Break-glass (docs/operations.md): the cluster admin lifts Phalanx's gate, and only it, by hand;
    # the scheduler then places the pod.
    cluster.kubectl("patch", "pod", name, "-n", gang_namespace, "--type=strategic", "-p", LIFT_GATE)
    eventually(lambda: count_bound(cluster, gang_namespace, "toobig") == 1, 30, what="the released pod bound")


def test_a_member_bound_without_phalanx_s_admission_is_reported(
    cluster: LocalCluster, phalanx: Phalanx, gang_namespace: str, pool: NodePool
) -> None:
    (node,) = pool.add(1, gpus=8)
    group = builders.podgroup("held", 3)
    apply(cluster, gang_namespace, group)
    # Bound at creation (spec.nodeName): it never waits at the gate, and the gang was never admitted.
    rogue = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "rogue", "labels": {GROUP_LABEL: "held"}},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "main", "image": "pause", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
        },
    }
    apply(cluster, gang_namespace, rogue)

    def reported() -> list[str]:
        return sorted(
            e["involvedObject"]["kind"]
            for name in ("rogue", "held")
            for e in events(cluster, gang_namespace, name)
            if e["reason"] == "GateBypassed" and e["type"] == "Warning"
        )

    assert eventually(reported, 30, what="GateBypassed on the pod and the PodGroup") == ["Pod", "PodGroup"]
    counted = re.search(r"^phalanx_gate_bypassed_pods_total (\S+)$", phalanx.metrics(), re.M)
    assert counted is not None and float(counted.group(1)) >= 1


def nodename_pod(name: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "containers": [
                {"name": "main", "image": "pause", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
            ],
        },
    }


@pytest.fixture
def node_name_policy(cluster: LocalCluster, tmp_path: Path) -> Iterator[None]:
    """deploy/components/node-name-policy applied as an overlay adds it; removed afterwards (it is
    cluster-wide, and other tests create pods with spec.nodeName on purpose)."""
    overlay = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncomponents:\n  - {}\n"
    (tmp_path / "kustomization.yaml").write_text(
        overlay.format(os.path.relpath(NODE_NAME_COMPONENT, tmp_path))
    )
    rendered = cluster.kubectl("kustomize", str(tmp_path)).stdout
    assert "phalanx-pod-node-name" in rendered
    cluster.kubectl("apply", "-f", "-", input=rendered)
    try:
        yield
    finally:
        cluster.kubectl("delete", "-f", "-", "--wait=true", input=rendered, check=False)


def test_the_node_name_policy_refuses_pods_bound_at_creation_in_opted_in_namespaces(
    cluster: LocalCluster, gang_namespace: str, namespace: str, pool: NodePool, node_name_policy: None
) -> None:
    (node,) = pool.add(1, gpus=8)
    as_tenant = tenant(cluster, gang_namespace)
    why = (
        f"pods in namespace {gang_namespace} may not set spec.nodeName ({node}): a pod bound at creation "
        "bypasses the scheduler and Phalanx's gang gate"
    )

    def attempt(name: str, *extra: str) -> Any:
        body = json.dumps(nodename_pod(name, node))
        return cluster.kubectl("create", "-n", gang_namespace, "-f", "-", *extra, input=body, check=False)

    # The API server picks a new policy up within a moment: dry runs until it does.
    eventually(lambda: refused(attempt("probe", "--dry-run=server"), why), 30, what="the policy in force")
    assert refused(attempt("rogue", *as_tenant), why)
    # A forged DaemonSet owner does not make a tenant's pod a DaemonSet's.
    forged = nodename_pod("forged", node)
    forged["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": "ds",
            "uid": str(uuid.uuid4()),
            "controller": True,
        }
    ]
    result = cluster.kubectl(
        "create", "-n", gang_namespace, "-f", "-", *as_tenant, input=json.dumps(forged), check=False
    )
    assert refused(result, why)
    assert pods(cluster, gang_namespace) == []
    # Namespaces that are not opted in are not Phalanx's business.
    cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(nodename_pod("elsewhere", node)))


# ---- item 11: the admission record is the controller's alone ----------------------------------


def test_a_tenant_cannot_forge_the_admission_record(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    as_tenant = tenant(cluster, gang_namespace)
    waiting = waiting_gang(cluster, gang_namespace, pool, "queued")
    eventually(lambda: cluster.kubectl_json("get", PODGROUPS, "queued", "-n", gang_namespace), 30)
    forged = json.dumps(
        {"at": time.time(), "placement": {p["metadata"]["uid"]: None for p in waiting}, "booked": {}}
    )
    annotate = ("annotate", PODGROUPS, "queued", "-n", gang_namespace, f"phalanx.io/admission={forged}")
    result = cluster.kubectl(*annotate, *as_tenant, check=False)
    assert refused(result, "written by the Phalanx controller only"), result.stderr

    # Nor on a PodGroup of its own making; the same PodGroup without it is the tenant's to create.
    own = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "own", "annotations": {"phalanx.io/admission": forged}},
        "spec": {"minMember": 2},
    }
    create = ("create", "-n", gang_namespace, "-f", "-")
    result = cluster.kubectl(*create, *as_tenant, input=json.dumps(own), check=False)
    assert refused(result, "written by the Phalanx controller only"), result.stderr
    del own["metadata"]["annotations"]
    cluster.kubectl(*create, *as_tenant, input=json.dumps(own))

    stays(lambda: all(gated(p) for p in members(cluster, gang_namespace, "queued")), 3.0, what="still gated")


def test_only_the_controller_writes_the_pod_templates_of_capacity_requests(
    cluster: LocalCluster, gang_namespace: str
) -> None:
    """The PodTemplates a ProvisioningRequest names are what the autoscaler provisions for: a tenant
    may not make or change one labelled with a gang, and the controller may delete only those. The
    built-in edit role grants no PodTemplates; this tenant's role does, as some clusters' do."""
    role = f"podtemplate-writer-{uuid.uuid4().hex[:6]}"
    cluster.kubectl(
        "create", "clusterrole", role, "--verb=get,list,create,update,patch,delete", "--resource=podtemplates"
    )
    as_tenant = tenant(cluster, gang_namespace, role)
    labelled = {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": "big", "labels": {"phalanx.io/pod-group": "g"}},
        "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}},
    }
    create = ("create", "-n", gang_namespace, "-f", "-")
    result = cluster.kubectl(*create, *as_tenant, input=json.dumps(labelled), check=False)
    assert refused(result, "written by the Phalanx controller only"), result.stderr

    plain = {**labelled, "metadata": {"name": "plain"}}
    cluster.kubectl(*create, *as_tenant, input=json.dumps(plain))  # the tenant's own, unlabelled
    relabel = ("label", "podtemplate", "plain", "-n", gang_namespace, "phalanx.io/pod-group=g")
    result = cluster.kubectl(*relabel, *as_tenant, check=False)
    assert refused(result, "written by the Phalanx controller only"), result.stderr
    delete = ("delete", "podtemplate", "plain", "-n", gang_namespace, "--dry-run=server")
    result = cluster.kubectl(*delete, "--as", CONTROLLER, check=False)
    assert refused(result, "may delete only the podtemplates it made"), result.stderr

    cluster.kubectl(*create, "--as", CONTROLLER, input=json.dumps(labelled))  # the controller's own
    cluster.kubectl("delete", "podtemplate", "big", "-n", gang_namespace, "--as", CONTROLLER)
    cluster.kubectl("delete", "clusterrole", role)


# ---- item 14: small ones -------------------------------------------------------------------------


def test_namespace_users_see_podgroups_with_view_and_write_them_with_edit(
    cluster: LocalCluster, gang_namespace: str
) -> None:
    as_viewer = tenant(cluster, gang_namespace, "view")
    as_editor = tenant(cluster, gang_namespace, "edit")
    group = builders.podgroup("mine", 2)
    # The aggregation controller folds the rules into view/edit shortly after install.
    eventually(
        lambda: (
            cluster.kubectl("get", "podgroups", "-n", gang_namespace, *as_viewer, check=False).returncode == 0
        ),
        30,
        what="a viewer lists podgroups",
    )
    create = ("create", "-n", gang_namespace, "-f", "-")
    result = cluster.kubectl(*create, *as_viewer, input=json.dumps(group), check=False)
    assert result.returncode != 0 and "forbidden" in result.stderr
    cluster.kubectl(*create, *as_editor, input=json.dumps(group))
    got = cluster.kubectl_json("get", PODGROUPS, "mine", "-n", gang_namespace, *as_viewer)
    assert got["spec"]["minMember"] == 2


def _webhook_requests(phalanx: Phalanx) -> float:
    lines = re.findall(r"^phalanx_webhook_requests_total\{[^}]*\} (\S+)$", phalanx.metrics("webhook"), re.M)
    return sum(float(v) for v in lines)


def test_the_webhook_is_never_called_for_kube_system_or_phalanx_system(
    cluster: LocalCluster, phalanx: Phalanx, namespace: str
) -> None:
    """Opted in by mistake, each of the two is still never sent to the webhook: not once. A third,
    ordinary namespace labelled at the same moment is, once per pod: the labels had arrived and
    the counter counts."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe", "labels": {GROUP_LABEL: "probe"}},
        "spec": {"containers": [{"name": "c", "image": "pause"}]},
    }
    excluded = ("kube-system", NAMESPACE)
    called: dict[str, float] = {}
    try:
        for ns in (*excluded, namespace):  # as if someone opted them in
            cluster.kubectl("label", "namespace", ns, "phalanx.io/gang-scheduling=enabled", "--overwrite")
        # Namespace labels reach the API server's admission cache: the control namespace shows when.
        eventually(
            lambda: _webhook_calls(cluster, phalanx, namespace, pod, 1) == 1, 20, what="the control is sent"
        )
        for ns in (*excluded, namespace):
            called[ns] = _webhook_calls(cluster, phalanx, ns, pod, 3)
    finally:
        for ns in excluded:
            cluster.kubectl("label", "namespace", ns, "phalanx.io/gang-scheduling-", check=False)
    assert called == {"kube-system": 0, NAMESPACE: 0, namespace: 3}, called


def _webhook_calls(
    cluster: LocalCluster, phalanx: Phalanx, ns: str, pod: dict[str, Any], times: int
) -> float:
    """How many admission requests the webhook served while ``times`` pods were created in ``ns``."""
    before = _webhook_requests(phalanx)
    for _ in range(times):
        # Refusals by Pod Security in phalanx-system do not matter: mutation comes first.
        cluster.kubectl("create", "--dry-run=server", "-n", ns, "-f", "-", input=json.dumps(pod), check=False)
    return _webhook_requests(phalanx) - before


def test_the_controller_may_only_lift_gates_pin_and_delete_gang_members(
    cluster: LocalCluster, gang_namespace: str, namespace: str, pool: NodePool
) -> None:
    as_controller = ["--as", CONTROLLER]
    waiting = waiting_gang(cluster, gang_namespace, pool, "narrow")
    name = waiting[0]["metadata"]["name"]
    node = pool.nodes[0]

    def patch(body: dict[str, Any], *extra: str) -> Any:
        return cluster.kubectl(
            "patch",
            "pod",
            name,
            "-n",
            gang_namespace,
            "--dry-run=server",
            "--type=strategic",
            "-p",
            json.dumps(body),
            *extra,
            *as_controller,
            check=False,
        )

    lift = {"schedulingGates": [{"$patch": "delete", "name": "phalanx.io/gang"}]}
    pin = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": NodePool.LABEL, "operator": "In", "values": [pool.name]}
                        ],
                        "matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}],
                    }
                ]
            }
        }
    }
    # Exactly what executor.lift_gates sends: allowed (members carry the pool's node selector as
    # a nodeSelector, so their required terms start empty; this one adds one term).
    simple_pin = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            }
        }
    }
    assert patch({"spec": {**lift, "affinity": simple_pin}}).returncode == 0
    assert patch({"spec": lift}).returncode == 0
    # Anything else is refused.
    assert refused(patch({"metadata": {"labels": {"x": "y"}}}), "labels, annotations, owners")
    assert refused(patch({"spec": {**lift, "affinity": pin}}), "to pin it to one node by name")
    assert refused(patch({"spec": {"affinity": simple_pin}}), "while lifting its gate")
    assert refused(
        patch({"spec": {**lift, "nodeSelector": {"kubernetes.io/hostname": node}}}), "node selector"
    )
    toleration = {"key": "k", "operator": "Exists", "effect": "NoSchedule"}
    assert refused(patch({"spec": {**lift, "tolerations": [toleration]}}), "tolerations")

    # Deletes: gang members only.
    plain = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bystander"},
        "spec": {"containers": [{"name": "c", "image": "pause"}]},
    }
    cluster.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(plain))
    linked_only = {**plain, "metadata": {"name": "linked", "labels": {"scheduling.x-k8s.io/pod-group": "x"}}}
    # phalanx.io/skip: the webhook leaves it as written (no phalanx.io/pod-group label).
    linked_only["metadata"]["labels"]["phalanx.io/skip"] = "true"
    for ns in (namespace, gang_namespace):
        cluster.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(linked_only))

    def delete(ns: str, pod: str) -> Any:
        return cluster.kubectl(
            "delete", "pod", pod, "-n", ns, "--dry-run=server", *as_controller, check=False
        )

    member = next(p for p in pods(cluster, gang_namespace) if p["metadata"]["name"] == name)
    assert member["metadata"]["labels"][GROUP_LABEL] == "narrow"
    assert delete(gang_namespace, name).returncode == 0
    assert delete(gang_namespace, "linked").returncode == 0  # a foreign link in an opted-in namespace
    assert refused(delete(namespace, "bystander"), "may delete gang members only")
    assert refused(delete(namespace, "linked"), "may delete gang members only")  # namespace not opted in
    assert not any(bound(p) for p in members(cluster, gang_namespace, "narrow"))


def test_the_webhook_answers_400_and_415_to_what_is_not_an_api_server_review(phalanx: Phalanx) -> None:
    context = ssl.create_default_context(cafile=str(phalanx.cert_dir / "ca.crt"))
    url = f"https://127.0.0.1:{phalanx.options.webhook_port}/mutate"
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "namespace": "x"},
    }

    def post(body: dict[str, Any], content_type: str) -> tuple[int, str]:
        request = urllib.request.Request(
            url, data=json.dumps(body).encode(), headers={"Content-Type": content_type}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, context=context, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    status, text = post(review, "application/json")  # no operation, no object
    assert status == 400 and "request.operation must be" in text
    complete = {**review, "request": {**review["request"], "operation": "CREATE", "object": {"metadata": {}}}}
    assert post(complete, "application/json")[0] == 200
    status, text = post(complete, "text/plain")
    assert status == 415 and "Content-Type must be application/json" in text


# ---- the policies follow the controller's ServiceAccount, wherever Phalanx is installed ----------

POLICY_BINDINGS = (
    "phalanx-gang-gate",
    "phalanx-admission-record",
    "phalanx-controller-pod-updates",
    "phalanx-controller-pod-deletes",
    "phalanx-controller-podgroup-deletes",
)


def _point_bindings_at(cluster: LocalCluster, namespace: str) -> None:
    body = json.dumps({"spec": {"paramRef": {"namespace": namespace}}})
    for binding in POLICY_BINDINGS:
        cluster.kubectl("patch", "validatingadmissionpolicybinding", binding, "--type=merge", "-p", body)


def test_the_policies_know_the_controller_of_an_install_in_another_namespace(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    """What `namespace: X` in an overlay changes in the policies (their bindings' paramRef), applied
    to the live bindings: the controller's ServiceAccount in X may lift the gate, the one in
    phalanx-system no longer may, and X's controller is held to what the controller may do."""
    elsewhere = f"phalanx-alt-{uuid.uuid4().hex[:6]}"
    as_moved = ["--as", f"system:serviceaccount:{elsewhere}:phalanx-controller"]
    cluster.kubectl("create", "namespace", elsewhere)
    cluster.kubectl("create", "serviceaccount", "phalanx-controller", "-n", elsewhere)
    cluster.kubectl(
        "create",
        "clusterrolebinding",
        elsewhere,
        "--clusterrole=phalanx-controller",
        f"--serviceaccount={elsewhere}:phalanx-controller",
    )
    as_tenant = tenant(cluster, gang_namespace)
    name = waiting_gang(cluster, gang_namespace, pool, "moved")[0]["metadata"]["name"]

    def lift(who: list[str], body: str = LIFT_GATE) -> Any:
        return cluster.kubectl(
            "patch", "pod", name, "-n", gang_namespace, "--dry-run=server", "--type=strategic",
            "-p", body, *who, check=False,
        )  # fmt: skip

    gate_refusal = "only Phalanx may remove the phalanx.io/gang scheduling gate"
    try:
        _point_bindings_at(cluster, elsewhere)
        eventually(
            lambda: lift(as_moved).returncode == 0 and refused(lift(["--as", CONTROLLER]), gate_refusal),
            30,
            what="the moved controller lifting the gate, the old identity refused",
        )
        assert refused(lift(as_tenant), gate_refusal)
        # Each binding is re-read by the API server on its own: the second policy's may lag the first's.
        relabel = json.dumps({"metadata": {"labels": {"x": "y"}}})
        eventually(
            lambda: refused(lift(as_moved, relabel), "labels, annotations, owners"),
            30,
            what="the moved controller held to what the controller may change",
        )
    finally:
        _point_bindings_at(cluster, NAMESPACE)
        cluster.kubectl("delete", "clusterrolebinding", elsewhere, check=False)
        cluster.kubectl("delete", "namespace", elsewhere, "--wait=false", check=False)
    # The session's controller is the controller again.
    eventually(lambda: lift(["--as", CONTROLLER]).returncode == 0, 30, what="the session's controller again")
