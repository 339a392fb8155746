"""The objects that guard the gang gate and tenants' access: in every install, naming the real
controller identity, and matching what the controller actually sends (docs/operations.md, "Security")."""

from __future__ import annotations

import pytest

from shared import constants as c

from .manifests import DEPLOY, NAMESPACE, Obj, kustomize, load, named, of_kind

POLICIES = {
    "phalanx-gang-gate",
    "phalanx-admission-record",
    "phalanx-controller-pod-updates",
    "phalanx-controller-pod-deletes",
    "phalanx-controller-podgroup-deletes",
    "phalanx-queue-skip",
    "phalanx-queue-grants",
    "phalanx-capacity-requests",
    "phalanx-capacity-templates",
}
# Policies on tenants' own requests: they name no controller.
TENANT_POLICIES = {"phalanx-queue-skip", "phalanx-queue-grants"}
CONTROLLER_USER = f"system:serviceaccount:{NAMESPACE}:phalanx-controller"
PODGROUP_GROUPS = {
    "scheduling.sigs.k8s.io",
    "scheduling.x-k8s.io",
    "scheduling.run.ai",
    "scheduling.volcano.sh",
}


def _policies() -> list[Obj]:
    return load(DEPLOY / "base/admission-policies.yaml")


@pytest.mark.parametrize("overlay", ["default", "local", "with-cert-manager"])
def test_every_install_carries_the_policies_and_their_bindings(overlay: str) -> None:
    objects = kustomize(DEPLOY / overlay)
    policies = {p["metadata"]["name"] for p in of_kind(objects, "ValidatingAdmissionPolicy")}
    assert policies == POLICIES
    for binding in of_kind(objects, "ValidatingAdmissionPolicyBinding"):
        assert binding["spec"]["validationActions"] == ["Deny"]
    bound = {b["spec"]["policyName"] for b in of_kind(objects, "ValidatingAdmissionPolicyBinding")}
    assert bound == POLICIES


def test_policies_fail_closed_and_name_the_controller_that_rbac_binds() -> None:
    objects = _policies()
    binding = named(load(DEPLOY / "base/controller-rbac.yaml"), "ClusterRoleBinding", "phalanx-controller")
    subject = binding["subjects"][0]
    assert f"system:serviceaccount:{subject['namespace']}:{subject['name']}" == CONTROLLER_USER
    for policy in of_kind(objects, "ValidatingAdmissionPolicy"):
        assert policy["spec"]["failurePolicy"] == "Fail"
        text = str(policy["spec"])
        assert "system:serviceaccount:" in text or policy["metadata"]["name"] in TENANT_POLICIES
    # Each binding's parameter is the ServiceAccount that ClusterRoleBinding binds (the policies
    # build the user name from it: test_install_namespace.py).
    for policy_binding in of_kind(objects, "ValidatingAdmissionPolicyBinding"):
        if policy_binding["spec"]["policyName"] in TENANT_POLICIES:
            continue  # they judge tenants by their namespace, not by who the controller is
        ref = policy_binding["spec"]["paramRef"]
        assert f"system:serviceaccount:{ref['namespace']}:{ref['name']}" == CONTROLLER_USER


def test_only_cluster_admins_and_the_break_glass_role_may_lift_the_gate_besides_the_controller() -> None:
    gate = named(_policies(), "ValidatingAdmissionPolicy", "phalanx-gang-gate")
    check = "authorizer.group('scheduling.phalanx.io').resource('gates').check('lift').allowed()"
    assert check in " ".join(str(gate["spec"]["validations"]).split())
    role = named(_policies(), "ClusterRole", "phalanx-gate-break-glass")
    lift = {"apiGroups": ["scheduling.phalanx.io"], "resources": ["gates"], "verbs": ["lift"]}
    assert role["rules"] == [lift]
    # Nobody is bound to it by the install: the controller is recognised by name, tenants never.
    for path in DEPLOY.rglob("*.yaml"):
        for obj in load(path):
            if obj.get("kind") in {"ClusterRoleBinding", "RoleBinding"}:
                assert obj["roleRef"]["name"] != "phalanx-gate-break-glass", path


def test_the_gate_and_admission_record_names_are_phalanx_s() -> None:
    gate = named(_policies(), "ValidatingAdmissionPolicy", "phalanx-gang-gate")
    assert f"'{c.GATE}'" in str(gate["spec"])
    record = named(_policies(), "ValidatingAdmissionPolicy", "phalanx-admission-record")
    assert f"'{c.ADMISSION_ANNOTATION}'" in str(record["spec"])
    groups = {g for rule in record["spec"]["matchConstraints"]["resourceRules"] for g in rule["apiGroups"]}
    assert groups == PODGROUP_GROUPS
    deletes = named(_policies(), "ValidatingAdmissionPolicy", "phalanx-controller-pod-deletes")
    # Every link the controller groups members by (shared/grouplink.py) lets it delete in an
    # opted-in namespace; nothing else does.
    for key in (*c.GROUP_LINK_LABELS, *c.GROUP_LINK_ANNOTATIONS):
        assert f"'{key}'" in str(deletes["spec"]), key
    # PodGroups: only the ones it made itself (retired when a user's of another kind arrives).
    retire = named(_policies(), "ValidatingAdmissionPolicy", "phalanx-controller-podgroup-deletes")
    assert f"'{c.MANAGED_BY_LABEL}'" in str(retire["spec"]) and f"'{c.MANAGED_BY_PHALANX}'" in str(
        retire["spec"]
    )


def test_tenants_read_podgroups_with_view_and_write_them_with_edit() -> None:
    roles = {r["metadata"]["name"]: r for r in of_kind(load(DEPLOY / "base/tenant-rbac.yaml"), "ClusterRole")}
    view, edit = roles["phalanx-podgroups-view"], roles["phalanx-podgroups-edit"]
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert "rbac.authorization.k8s.io/aggregate-to-view" not in edit["metadata"]["labels"]
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    for role in (view, edit):
        for rule in role["rules"]:
            assert set(rule["apiGroups"]) == PODGROUP_GROUPS
    assert {v for r in view["rules"] for v in r["verbs"]} == {"get", "list", "watch"}
    # Status is Phalanx's to write.
    assert all("podgroups/status" not in r["resources"] for r in edit["rules"])


def test_network_policy_admits_the_webhook_port_from_addresses_only() -> None:
    (policy,) = load(DEPLOY / "components/network-policy/network-policy.yaml")
    webhook = named(
        load(DEPLOY / "components/workloads/webhook-deployment.yaml"), "Deployment", "phalanx-webhook"
    )
    assert (
        policy["spec"]["podSelector"]["matchLabels"].items()
        <= webhook["spec"]["template"]["metadata"]["labels"].items()
    )
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    admission = [r for r in policy["spec"]["ingress"] if {"protocol": "TCP", "port": 9443} in r["ports"]]
    assert len(admission) == 1
    peers = admission[0]["from"]
    assert peers and all(set(peer) == {"ipBlock"} for peer in peers)  # no pod or namespace selectors


def test_queue_policies_read_the_names_the_controller_reads() -> None:
    skip = str(named(_policies(), "ValidatingAdmissionPolicy", "phalanx-queue-skip")["spec"])
    grants = str(named(_policies(), "ValidatingAdmissionPolicy", "phalanx-queue-grants")["spec"])
    assert f"'{c.SKIP}'" in skip and f"'{c.SKIP_ALLOWED_LABEL}'" in skip
    for key in (*c.QUEUE_LINK_LABELS, c.ALLOWED_QUEUES_ANNOTATION):
        assert f"'{key}'" in grants, key
    for spec in (skip, grants):  # only namespaces opted in and bound to a queue
        assert c.OPT_IN_LABEL in spec and c.QUEUE_LABEL in spec


def test_the_node_name_policy_is_a_component_of_its_own() -> None:
    objects = load(DEPLOY / "components/node-name-policy/node-name-policy.yaml")
    policy = named(objects, "ValidatingAdmissionPolicy", "phalanx-pod-node-name")
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConstraints"]["namespaceSelector"] == {
        "matchLabels": {c.OPT_IN_LABEL: c.OPT_IN_VALUE}
    }
    binding = named(objects, "ValidatingAdmissionPolicyBinding", "phalanx-pod-node-name")
    assert binding["spec"]["validationActions"] == ["Deny"]
