"""The pure mutation: every rule of the webhook's contract, table-driven."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from shared import constants as c
from shared.kinds import JOB
from tests.builders import Builder, job, mpijob, pod, statefulset
from webhook.mutate import Mutation, MutationConfig, Outcome, mutate

from .builders import apply_patch, request

CONFIG = MutationConfig()
TEMPLATE = ("spec", "template")
LAUNCHER = ("spec", "mpiReplicaSpecs", "Launcher", "template")
WORKER = ("spec", "mpiReplicaSpecs", "Worker", "template")
# Words that only appear in warnings that explain a change.
CHANGE_WORDS = ("join gang", "replaced by", "set to", "labelled")


def run(obj: Builder | dict[str, Any], **kwargs: Any) -> tuple[Mutation, dict[str, Any]]:
    """Mutate, check the patch applies, and return the mutation and the patched object."""
    req = request(obj, **kwargs)
    mutation = mutate(req, CONFIG)
    return mutation, apply_patch(req["object"], mutation.ops)


def at(doc: dict[str, Any], *path: str) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def template_of(doc: dict[str, Any], path: tuple[str, ...] = TEMPLATE) -> Any:
    return at(doc, *path)


def gates(template: dict[str, Any]) -> list[str]:
    return [g["name"] for g in template["spec"].get("schedulingGates", [])]


def labels_of(template: dict[str, Any]) -> Any:
    return template.get("metadata", {}).get("labels", {})


def annotations_of(template: dict[str, Any]) -> Any:
    return template.get("metadata", {}).get("annotations", {})


def assert_idempotent(obj: Builder, **kwargs: Any) -> None:
    req = request(obj, **kwargs)
    first = mutate(req, CONFIG)
    again = mutate({**req, "object": apply_patch(req["object"], first.ops)}, CONFIG)
    assert again.ops == []
    assert again.outcome in (Outcome.UNCHANGED, Outcome.SKIPPED)
    assert not [w for w in again.warnings if any(word in w for word in CHANGE_WORDS)]


# --- workloads: gate, label, group -------------------------------------------------------------


def test_job_gets_gate_label_and_size() -> None:
    mutation, out = run(job("train").parallelism(4).gpus(1))
    template = template_of(out)
    assert mutation.outcome is Outcome.PATCHED
    assert mutation.group == "train"
    assert gates(template) == [c.GATE]
    assert labels_of(template) == {c.POD_GROUP_LABEL: "train"}
    assert annotations_of(template) == {c.INFERRED_MIN_MEMBER_ANNOTATION: "4"}
    assert mutation.warnings == [
        "phalanx: spec.template pods join gang 'train' (from metadata.name, 4 pods) and wait at gate "
        "phalanx.io/gang until all fit",
        "phalanx: spec.podFailurePolicy added (Ignore pods with condition DisruptionTarget) so that pods "
        "evicted to make room for a higher-priority gang do not count against backoffLimit "
        "(and spec.podReplacementPolicy set to Failed, which that requires)",
    ]
    assert out["spec"]["podReplacementPolicy"] == "Failed"
    assert all(w.startswith("phalanx: ") for w in mutation.warnings)
    assert out["spec"]["podFailurePolicy"] == {
        "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
    }


def test_job_with_its_own_failure_policy_is_only_warned() -> None:
    mutation, out = run(job("train").failure_policy({"rules": []}))
    assert out["spec"]["podFailurePolicy"] == {"rules": []}
    assert any("count against its backoffLimit" in w for w in mutation.warnings)


def test_missing_parents_are_created_with_whole_objects() -> None:
    mutation, _ = run(job("train"))
    assert [(op["op"], op["path"]) for op in mutation.ops] == [
        ("add", "/spec/template/spec/schedulingGates"),
        ("add", "/spec/template/metadata"),
        ("add", "/spec/template/metadata/annotations"),
        ("add", "/spec/podFailurePolicy"),
        ("add", "/spec/podReplacementPolicy"),
    ]
    assert mutation.ops[1]["value"] == {"labels": {c.POD_GROUP_LABEL: "train"}}


def test_existing_maps_get_escaped_member_paths() -> None:
    mutation, _ = run(job("train").template_label("app", "x").template_annotation("note", "y"))
    paths = [op["path"] for op in mutation.ops]
    assert "/spec/template/metadata/labels/phalanx.io~1pod-group" in paths
    assert "/spec/template/metadata/annotations/phalanx.io~1inferred-min-member" in paths


def test_existing_gates_are_kept_and_ours_appended() -> None:
    mutation, out = run(job("train").gate("example.com/quota"))
    assert {"op": "add", "path": "/spec/template/spec/schedulingGates/-", "value": {"name": c.GATE}} in (
        mutation.ops
    )
    assert gates(template_of(out)) == ["example.com/quota", c.GATE]


@pytest.mark.parametrize(
    ("builder", "expected"),
    [
        (job("j").template_label(c.POD_GROUP_LABEL, "pg"), "pg"),
        (job("j").template_label(c.COSCHEDULING_LABEL, "pg"), "pg"),
        (job("j").template_label(c.ACS_LABEL, "pg"), "pg"),
        (job("j").template_label(c.SCHEDULER_PLUGINS_LABEL, "pg"), "pg"),
        (job("j").template_annotation(c.KAI_ANNOTATION, "pg"), "pg"),
        (job("j").template_annotation(c.KAI_POD_GROUP_ANNOTATION, "pg"), "pg"),
        (job("j").template_annotation(c.VOLCANO_ANNOTATION, "pg"), "pg"),
        (job("j").label(c.COSCHEDULING_LABEL, "pg"), "pg"),
        (job("j").annotation(c.KAI_ANNOTATION, "pg"), "pg"),
        (job("j").label(c.ACS_LABEL, "pg"), "pg"),
        # The template's link is more specific than the workload's.
        (job("j").label(c.ACS_LABEL, "outer").template_label(c.ACS_LABEL, "inner"), "inner"),
        # The canonical label wins over foreign forms.
        (job("j").template_label(c.KAI_ANNOTATION, "x").template_label(c.POD_GROUP_LABEL, "pg"), "pg"),
        (statefulset("s").template_label(c.SCHEDULER_PLUGINS_LABEL, "pg"), "pg"),
        (statefulset("s"), "s"),
        (mpijob("m"), "m"),
        (mpijob("m").annotation(c.VOLCANO_ANNOTATION, "pg"), "pg"),
    ],
)
def test_group_link_forms_on_workloads(builder: Builder, expected: str) -> None:
    mutation, out = run(builder)
    paths = (LAUNCHER, WORKER) if builder.gvk[2] == "MPIJob" else (TEMPLATE,)
    for path in paths:
        assert labels_of(template_of(out, path))[c.POD_GROUP_LABEL] == expected
        assert c.GATE in gates(template_of(out, path))
    assert mutation.group == expected


def test_mpijob_unlinked_launcher_joins_the_workers_group() -> None:
    mutation, out = run(mpijob("m").worker_label(c.COSCHEDULING_LABEL, "horovod"))
    assert labels_of(template_of(out, LAUNCHER))[c.POD_GROUP_LABEL] == "horovod"
    assert labels_of(template_of(out, WORKER))[c.POD_GROUP_LABEL] == "horovod"
    assert mutation.group == "horovod"


def test_generate_name_without_link_is_left_alone_with_a_warning() -> None:
    mutation, _ = run(job(""))
    assert mutation.outcome is Outcome.SKIPPED
    assert mutation.ops == []
    assert len(mutation.warnings) == 1
    assert "generateName" in mutation.warnings[0]
    assert mutation.warnings[0].startswith("phalanx: ")


def test_generate_name_with_a_link_is_gated() -> None:
    mutation, out = run(job("").template_label(c.COSCHEDULING_LABEL, "pg"))
    assert mutation.outcome is Outcome.PATCHED
    assert labels_of(template_of(out))[c.POD_GROUP_LABEL] == "pg"


# --- sizes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("builder", "size"),
    [
        (job(), 1),
        (job().parallelism(4), 4),
        (job().parallelism(4).completions(2), 2),
        (job().parallelism(4).completions(16), 4),
        (job().completions(8), 1),
        (job().parallelism(0), 1),
        (statefulset(), 1),
        (statefulset().replicas(3), 3),
        (mpijob().launchers(None).workers(8), 9),
        (mpijob().launchers(1).workers(8).launcher_policy("AtStartup"), 9),
        (mpijob().launchers(1).workers(8).launcher_policy("WaitForWorkersReady"), 8),
        (mpijob().workers(None), 1),
        (mpijob().workers(None).launcher_policy("WaitForWorkersReady"), 1),
        # The lightweight Coscheduling form declares the size itself.
        (
            job()
            .parallelism(8)
            .template_label(c.COSCHEDULING_LABEL, "pg")
            .template_label(c.COSCHEDULING_MIN_AVAILABLE_LABEL, "3"),
            3,
        ),
        (job().parallelism(8).template_label(c.COSCHEDULING_MIN_AVAILABLE_LABEL, "5"), 5),
        (job().parallelism(8).template_label(c.COSCHEDULING_MIN_AVAILABLE_LABEL, "zero"), 8),
    ],
)
def test_inferred_gang_size(builder: Builder, size: int) -> None:
    _, out = run(builder)
    paths = (LAUNCHER, WORKER) if builder.gvk[2] == "MPIJob" else (TEMPLATE,)
    for path in paths:
        assert annotations_of(template_of(out, path))[c.INFERRED_MIN_MEMBER_ANNOTATION] == str(size)


def test_workload_annotations_are_copied_to_templates() -> None:
    builder = (
        mpijob("m")
        .workers(8)
        .annotation(c.MIN_MEMBER_ANNOTATION, "4")
        .annotation(c.SCHEDULE_TIMEOUT_ANNOTATION, "600")
        .annotation(c.PLACEMENT_ANNOTATION, "pinned")
        .annotation(c.PREEMPTIBLE, "false")
        .annotation(c.TOPOLOGY_REQUIRED_ANNOTATION, "topology.kubernetes.io/rack")
        .annotation("unrelated.example.com/x", "y")
    )
    mutation, out = run(builder)
    for path in (LAUNCHER, WORKER):
        assert annotations_of(template_of(out, path)) == {
            c.INFERRED_MIN_MEMBER_ANNOTATION: "9",
            c.MIN_MEMBER_ANNOTATION: "4",
            c.SCHEDULE_TIMEOUT_ANNOTATION: "600",
            c.PLACEMENT_ANNOTATION: "pinned",
            c.PREEMPTIBLE: "false",
            c.TOPOLOGY_REQUIRED_ANNOTATION: "topology.kubernetes.io/rack",
        }
    assert "4 pods" in mutation.warnings[0]


@pytest.mark.parametrize("link", c.QUEUE_LINK_LABELS)
def test_a_workloads_queue_label_reaches_its_pods(link: str) -> None:
    _, out = run(job().label(link, "team-a"))
    assert annotations_of(template_of(out))[c.QUEUE_LABEL] == "team-a"


def test_template_annotation_wins_over_the_workloads() -> None:
    builder = job().annotation(c.MIN_MEMBER_ANNOTATION, "4").template_annotation(c.MIN_MEMBER_ANNOTATION, "2")
    _, out = run(builder)
    assert annotations_of(template_of(out))[c.MIN_MEMBER_ANNOTATION] == "2"


# --- traps ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("policy", "op"), [(None, "add"), ("OrderedReady", "replace")])
def test_statefulset_ordered_ready_becomes_parallel(policy: str | None, op: str) -> None:
    builder = statefulset().replicas(4)
    if policy:
        builder.policy(policy)
    mutation, out = run(builder)
    assert out["spec"]["podManagementPolicy"] == "Parallel"
    assert {"op": op, "path": "/spec/podManagementPolicy", "value": "Parallel"} in mutation.ops
    assert any("podManagementPolicy set to Parallel" in w and "OrderedReady" in w for w in mutation.warnings)


def test_statefulset_parallel_is_untouched() -> None:
    mutation, _ = run(statefulset().policy("Parallel"))
    assert not [op for op in mutation.ops if op["path"] == "/spec/podManagementPolicy"]
    assert not [w for w in mutation.warnings if "podManagementPolicy" in w]


def test_skipped_statefulset_keeps_its_policy() -> None:
    mutation, _ = run(statefulset().label(c.SKIP, "true"))
    assert mutation.ops == []


def test_job_active_deadline_is_warned_about() -> None:
    mutation, out = run(job().active_deadline(3600))
    assert out["spec"]["activeDeadlineSeconds"] == 3600
    assert any("activeDeadlineSeconds=3600 keeps counting" in w for w in mutation.warnings)


def test_mpijob_run_policy_deadline_is_warned_about() -> None:
    mutation, _ = run(mpijob().run_policy_deadline(600))
    assert any("runPolicy.activeDeadlineSeconds=600" in w for w in mutation.warnings)


@pytest.mark.parametrize("scheduler", c.DEFAULT_FOREIGN_GANG_SCHEDULERS)
def test_foreign_gang_scheduler_is_replaced(scheduler: str) -> None:
    mutation, out = run(mpijob().scheduler(scheduler))
    for path in (LAUNCHER, WORKER):
        assert template_of(out, path)["spec"]["schedulerName"] == "default-scheduler"
    rewrites = [w for w in mutation.warnings if f"{scheduler} replaced by default-scheduler" in w]
    assert len(rewrites) == 2


def test_other_schedulers_are_kept() -> None:
    _, out = run(job().scheduler("my-scheduler"))
    assert template_of(out)["spec"]["schedulerName"] == "my-scheduler"


def test_scheduler_rewrite_is_configurable() -> None:
    config = MutationConfig(foreign_schedulers=frozenset({"my-gang"}), target_scheduler="other")
    req = request(job().scheduler("my-gang"))
    out = apply_patch(req["object"], mutate(req, config).ops)
    assert template_of(out)["spec"]["schedulerName"] == "other"
    req = request(job().scheduler("volcano"))
    out = apply_patch(req["object"], mutate(req, config).ops)
    assert template_of(out)["spec"]["schedulerName"] == "volcano"


# --- pods -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("builder", "expected"),
    [
        (pod().label(c.COSCHEDULING_LABEL, "pg").label(c.COSCHEDULING_MIN_AVAILABLE_LABEL, "4"), "pg"),
        (pod().label(c.ACS_LABEL, "pg"), "pg"),
        (pod().label(c.SCHEDULER_PLUGINS_LABEL, "pg"), "pg"),
        (pod().annotation(c.KAI_ANNOTATION, "pg"), "pg"),
        (pod().annotation(c.VOLCANO_ANNOTATION, "pg"), "pg"),
        (pod().label(c.POD_GROUP_LABEL, "pg"), "pg"),
        (pod().workload_ref("training", "workers"), "training-workers"),
        # Each replica of a Workload podGroup is a gang of its own.
        (pod().workload_ref("training", "workers", "r1"), "training-workers-r1"),
        (pod().workload_ref("training", "workers", ""), "training-workers"),
        # 1.36+: a native PodGroup's gang keeps its name.
        (pod().scheduling_group("training"), "training"),
    ],
)
def test_pod_link_forms(builder: Builder, expected: str) -> None:
    mutation, out = run(builder)
    assert mutation.outcome is Outcome.PATCHED
    assert gates(out) == [c.GATE]
    assert out["metadata"]["labels"][c.POD_GROUP_LABEL] == expected
    assert mutation.warnings[0].startswith(f"phalanx: pod joins gang '{expected}'")


def test_a_pod_of_a_native_podgroup_is_told_where_its_gang_comes_from() -> None:
    mutation, out = run(pod().scheduling_group("training"))
    assert out["spec"]["schedulingGroup"] == {"podGroupName": "training"}  # immutable: left as it is
    assert mutation.warnings[0] == (
        f"phalanx: pod joins gang 'training' (from spec.schedulingGroup.podGroupName) at gate {c.GATE}"
    )


def test_pod_without_link_passes_untouched() -> None:
    mutation, _ = run(pod().label("app", "web").scheduler("my-own-scheduler"))
    assert mutation.outcome is Outcome.SKIPPED
    assert (mutation.ops, mutation.warnings) == ([], [])


def test_pod_without_link_naming_a_missing_gang_scheduler_goes_to_the_default_one() -> None:
    # A KAI quickstart pod (queue label, no group): it would stay Pending forever.
    mutation, out = run(pod().label("kai.scheduler/queue", "research").scheduler("kai-scheduler"))
    assert mutation.outcome is Outcome.PATCHED
    assert out["spec"]["schedulerName"] == "default-scheduler"
    assert gates(out) == []  # not a gang: nothing says how big it would be
    assert c.POD_GROUP_LABEL not in out["metadata"].get("labels", {})
    assert "kai-scheduler replaced by default-scheduler" in mutation.warnings[0]
    assert "scheduled on its own" in mutation.warnings[1]
    again, _ = run(pod().label("kai.scheduler/queue", "research").scheduler("default-scheduler"))
    assert again.ops == []


def test_pod_with_node_name_is_left_alone_with_a_warning() -> None:
    mutation, _ = run(pod().label(c.COSCHEDULING_LABEL, "pg").node_name("node-a").scheduler("volcano"))
    assert mutation.outcome is Outcome.SKIPPED
    assert mutation.ops == []
    assert len(mutation.warnings) == 1
    assert "nodeName" in mutation.warnings[0]


def test_gated_pod_gets_only_the_missing_label() -> None:
    mutation, out = run(pod().annotation(c.KAI_ANNOTATION, "pg").gate(c.GATE))
    assert [op["path"] for op in mutation.ops] == ["/metadata/labels"]
    assert gates(out) == [c.GATE]
    assert mutation.warnings == [
        f"phalanx: pod labelled {c.POD_GROUP_LABEL}=pg (from annotation {c.KAI_ANNOTATION})"
    ]


def test_pod_of_a_gated_template_is_unchanged() -> None:
    mutation, _ = run(pod().label(c.POD_GROUP_LABEL, "train").gate(c.GATE))
    assert mutation.outcome is Outcome.UNCHANGED
    assert (mutation.ops, mutation.warnings) == ([], [])


def test_pod_foreign_scheduler_is_replaced() -> None:
    mutation, out = run(pod().annotation(c.KAI_ANNOTATION, "pg").scheduler("kai-scheduler"))
    assert out["spec"]["schedulerName"] == "default-scheduler"
    assert any("kai-scheduler replaced by default-scheduler" in w for w in mutation.warnings)


# --- opt-out, scope ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "builder",
    [
        job().label(c.SKIP, "true"),
        job().annotation(c.SKIP, "True"),
        job().template_label(c.SKIP, "true"),
        statefulset().template_annotation(c.SKIP, "true"),
        mpijob().annotation(c.SKIP, "true"),
        pod().label(c.COSCHEDULING_LABEL, "pg").label(c.SKIP, "true"),
        pod().label(c.COSCHEDULING_LABEL, "pg").annotation(c.SKIP, "true"),
    ],
)
def test_skip_leaves_the_object_untouched(builder: Builder) -> None:
    mutation, _ = run(builder)
    assert mutation.outcome is Outcome.SKIPPED
    assert mutation.ops == []


def test_a_skipped_workload_passes_the_skip_to_templates_that_would_gate_its_pods() -> None:
    """Pods are admitted without their workload: a linked template would gate them."""
    builder = job().annotation(c.SKIP, "true").template_label(c.SCHEDULER_PLUGINS_LABEL, "pg")
    builder.scheduler("scheduler-plugins-scheduler")
    mutation, out = run(builder)
    assert mutation.outcome is Outcome.PATCHED
    template = out["spec"]["template"]
    assert template["metadata"]["labels"][c.SKIP] == "true"
    assert gates(template) == []
    assert template["spec"]["schedulerName"] == "scheduler-plugins-scheduler"  # otherwise untouched
    assert [op["path"] for op in mutation.ops] == ["/spec/template/metadata/labels/phalanx.io~1skip"]
    assert "so that its pods are left alone too" in mutation.warnings[0]
    again, _ = run(builder.template_label(c.SKIP, "true"))
    assert again.ops == []


def test_skip_on_one_template_leaves_only_that_one() -> None:
    builder = mpijob()
    builder.obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["metadata"] = {"labels": {c.SKIP: "true"}}
    mutation, out = run(builder)
    assert mutation.outcome is Outcome.PATCHED
    assert gates(template_of(out, LAUNCHER)) == []
    assert gates(template_of(out, WORKER)) == [c.GATE]


def test_skip_false_is_not_skip() -> None:
    mutation, _ = run(job().label(c.SKIP, "false"))
    assert mutation.outcome is Outcome.PATCHED


@pytest.mark.parametrize("operation", ["UPDATE", "DELETE", "CONNECT", "", "create"])
def test_only_create_is_mutated(operation: str) -> None:
    mutation, _ = run(job().parallelism(2), operation=operation)
    assert mutation.outcome is Outcome.SKIPPED
    assert (mutation.ops, mutation.warnings) == ([], [])


def update(new: dict[str, Any], old: dict[str, Any], namespace: str = "ml") -> dict[str, Any]:
    req = request(new, operation="UPDATE", gvk=("apps", "v1", "StatefulSet"), namespace=namespace)
    req["oldObject"] = old
    return req


@pytest.mark.parametrize("policy", ["OrderedReady", None])
def test_a_reapplied_statefulset_keeps_the_parallel_policy_set_at_creation(policy: str | None) -> None:
    created = statefulset().policy("Parallel").build()
    reapplied = statefulset().build()
    if policy:
        reapplied["spec"]["podManagementPolicy"] = policy
    req = update(reapplied, created)
    mutation = mutate(req, CONFIG)
    assert mutation.outcome is Outcome.PATCHED
    assert apply_patch(req["object"], mutation.ops)["spec"]["podManagementPolicy"] == "Parallel"
    assert mutation.ops == [
        {"op": "replace" if policy else "add", "path": "/spec/podManagementPolicy", "value": "Parallel"}
    ]
    assert "kept Parallel" in mutation.warnings[0]


def test_other_statefulset_updates_are_left_alone() -> None:
    same = statefulset().policy("Parallel").build()
    assert mutate(update(same, same), CONFIG).ops == []
    # Created OrderedReady (skipped, or before the namespace opted in): not Phalanx's to keep.
    ordered = statefulset().policy("OrderedReady").build()
    assert mutate(update(statefulset().policy("Parallel").build(), ordered), CONFIG).ops == []
    changed = statefulset().policy("OrderedReady").build()
    assert mutate(update(changed, same, namespace="kube-system"), CONFIG).ops == []


@pytest.mark.parametrize("namespace", ["kube-system", "kube-public", "kube-node-lease", "phalanx-system"])
def test_excluded_namespaces_are_not_mutated(namespace: str) -> None:
    mutation, _ = run(job(), namespace=namespace)
    assert mutation.outcome is Outcome.SKIPPED
    assert mutation.ops == []


def test_excluded_namespace_from_object_metadata_and_config() -> None:
    obj = job().build()
    obj["metadata"]["namespace"] = "kube-system"
    assert mutate(request(obj, gvk=JOB, namespace=""), CONFIG).ops == []
    config = MutationConfig(excluded_namespaces=frozenset({"batch-infra"}))
    assert mutate(request(job(), namespace="batch-infra"), config).ops == []
    assert mutate(request(job(), namespace="kube-system"), config).ops != []


@pytest.mark.parametrize(
    "gvk",
    [
        ("apps", "v1", "Deployment"),
        ("batch", "v1beta1", "Job"),
        ("kubeflow.org", "v1", "MPIJob"),
        ("", "v1", "ConfigMap"),
        ("", "", ""),
    ],
)
def test_unhandled_kinds_pass(gvk: tuple[str, str, str]) -> None:
    mutation = mutate(request(job().build(), gvk=gvk), CONFIG)
    assert mutation.outcome is Outcome.SKIPPED
    assert (mutation.ops, mutation.warnings) == ([], [])


def test_subresources_pass() -> None:
    req = request(pod().label(c.COSCHEDULING_LABEL, "pg"))
    req["subResource"] = "binding"
    assert mutate(req, CONFIG).outcome is Outcome.SKIPPED


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "builder",
    [
        job().annotation(c.MIN_MEMBER_ANNOTATION, "four"),
        job().annotation(c.MIN_MEMBER_ANNOTATION, "0"),
        job().template_annotation(c.MIN_MEMBER_ANNOTATION, "-2"),
        job().annotation(c.SCHEDULE_TIMEOUT_ANNOTATION, "10m"),
        job().annotation(c.PLACEMENT_ANNOTATION, "spread"),
        job().annotation(c.TOPOLOGY_REQUIRED_ANNOTATION, "rack with spaces"),
        job().annotation(c.TOPOLOGY_REQUIRED_ANNOTATION, "Example.COM/rack"),
        job().annotation(c.TOPOLOGY_REQUIRED_ANNOTATION, "example.com/"),
        job().template_label(c.COSCHEDULING_LABEL, "x" * 64),
        pod().annotation(c.KAI_ANNOTATION, "not a label value"),
        pod().label(c.COSCHEDULING_LABEL, "pg").annotation(c.MIN_MEMBER_ANNOTATION, "1.5"),
    ],
)
def test_unreadable_phalanx_values_are_refused(builder: Builder) -> None:
    mutation, _ = run(builder)
    assert mutation.outcome is Outcome.REJECTED
    assert not mutation.allowed
    assert mutation.ops == []
    assert mutation.reason.startswith("phalanx: ")


@pytest.mark.parametrize(
    "builder",
    [
        job().annotation(c.MIN_MEMBER_ANNOTATION, "8"),
        job().annotation(c.SCHEDULE_TIMEOUT_ANNOTATION, "0"),
        job().annotation(c.PLACEMENT_ANNOTATION, "free"),
        job().annotation(c.TOPOLOGY_REQUIRED_ANNOTATION, "topology.kubernetes.io/rack"),
        job().annotation(c.TOPOLOGY_REQUIRED_ANNOTATION, "nvidia.com/gpu.clique"),
        job().annotation(c.TOPOLOGY_REQUIRED_ANNOTATION, "rack"),
        job().template_label(c.COSCHEDULING_LABEL, "x" * 63),
    ],
)
def test_readable_phalanx_values_are_accepted(builder: Builder) -> None:
    assert run(builder)[0].outcome is Outcome.PATCHED


# --- robustness, idempotency ------------------------------------------------------------------


def test_template_that_is_not_an_object_is_reported() -> None:
    builder = mpijob()
    builder.obj["spec"]["mpiReplicaSpecs"]["Launcher"]["template"] = "oops"
    mutation, out = run(builder)
    assert mutation.outcome is Outcome.PATCHED
    assert gates(template_of(out, WORKER)) == [c.GATE]
    assert any("Launcher.template is not an object" in w for w in mutation.warnings)


def test_labels_that_are_not_an_object_roll_back_that_template() -> None:
    builder = job()
    builder.obj["spec"]["template"]["metadata"] = {"labels": ["a"]}
    mutation, _ = run(builder)
    assert mutation.outcome is Outcome.SKIPPED
    assert mutation.ops == []
    assert any("/spec/template/metadata/labels is not an object" in w for w in mutation.warnings)


def test_mutate_never_changes_its_input() -> None:
    req = request(mpijob().scheduler("volcano").annotation(c.MIN_MEMBER_ANNOTATION, "3"))
    before = copy.deepcopy(req)
    mutate(req, CONFIG)
    assert req == before


@pytest.mark.parametrize(
    "builder",
    [
        job().parallelism(4).gpus(1).active_deadline(60).scheduler("volcano"),
        job()
        .template_label(c.COSCHEDULING_LABEL, "pg")
        .template_label(c.COSCHEDULING_MIN_AVAILABLE_LABEL, "2"),
        job().gate("example.com/other").annotation(c.MIN_MEMBER_ANNOTATION, "2"),
        statefulset().replicas(4),
        statefulset().policy("OrderedReady").scheduler("kai-scheduler"),
        mpijob().workers(8).launcher_policy("WaitForWorkersReady").annotation(c.PLACEMENT_ANNOTATION, "free"),
        mpijob()
        .worker_label(c.COSCHEDULING_LABEL, "horovod")
        .worker_label(c.COSCHEDULING_MIN_AVAILABLE_LABEL, "8"),
        pod().label(c.COSCHEDULING_LABEL, "pg"),
        pod().annotation(c.VOLCANO_ANNOTATION, "pg").scheduler("volcano"),
        pod().workload_ref("w", "g"),
    ],
)
def test_mutation_is_idempotent(builder: Builder) -> None:
    assert_idempotent(builder)


def test_a_malformed_pod_failure_policy_is_warned_about_not_an_internal_error() -> None:
    builder = job()
    builder.obj["spec"]["podFailurePolicy"] = {"rules": [{"action": "Ignore", "onPodConditions": 5}]}
    mutation, _ = run(builder)
    assert mutation.outcome is Outcome.PATCHED
    assert any("count against its backoffLimit" in w for w in mutation.warnings)


def test_a_job_made_by_another_workload_keeps_the_gang_size_of_its_template() -> None:
    """mpi-operator's launcher Job is a copy of the MPIJob's launcher template, sized for the gang."""
    launcher = job().parallelism(1).template_annotation(c.INFERRED_MIN_MEMBER_ANNOTATION, "9")
    launcher.obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "pi", "uid": "u", "controller": True}
    ]
    _, out = run(launcher)
    assert annotations_of(template_of(out))[c.INFERRED_MIN_MEMBER_ANNOTATION] == "9"

    # A Job of its own (a copied manifest): its own spec says how big it is.
    standalone = job().parallelism(1).template_annotation(c.INFERRED_MIN_MEMBER_ANNOTATION, "9")
    _, out = run(standalone)
    assert annotations_of(template_of(out))[c.INFERRED_MIN_MEMBER_ANNOTATION] == "1"


def test_an_overlong_group_name_is_refused_and_not_kept() -> None:
    """Names are remembered to check a gang's members once; a client's megabytes must not be."""
    from webhook import validation

    before = validation._label_value.cache_info().currsize
    name = "g" * (2 * 1024 * 1024)
    denial = validation.check_group_name(name, "label phalanx.io/pod-group")
    assert denial is not None and "not a valid label value" in denial
    assert validation._label_value.cache_info().currsize == before
    assert validation.check_group_name("g" * 63, "x") is None
    assert validation.check_group_name("g" * 64, "x") is not None


# --- a workload opted in by its own label --------------------------------------------------------

OPT_IN = {c.OPT_IN_LABEL: c.OPT_IN_VALUE}


@pytest.mark.parametrize("builder", [job().parallelism(2), statefulset().replicas(2), mpijob().workers(2)])
def test_a_workload_opted_in_by_its_label_passes_the_label_to_every_pod_template(builder: Builder) -> None:
    """Its pods are then selected by the pod webhook's object selector: without the label, they
    would be created in a namespace that is not opted in without ever reaching the webhook."""
    mutation, out = run(builder.label(c.OPT_IN_LABEL, c.OPT_IN_VALUE))
    assert mutation.outcome is Outcome.PATCHED
    paths = [LAUNCHER, WORKER] if out["kind"] == "MPIJob" else [TEMPLATE]
    for path in paths:
        template = template_of(out, path)
        assert labels_of(template).items() >= {**OPT_IN, c.POD_GROUP_LABEL: "train"}.items()
        assert gates(template) == [c.GATE]
    assert_idempotent(builder)


@pytest.mark.parametrize("value", [None, "disabled", "true"])
def test_only_the_opt_in_label_itself_is_passed_on(value: str | None) -> None:
    builder = job().parallelism(2)
    if value is not None:
        builder = builder.label(c.OPT_IN_LABEL, value)
    _, out = run(builder)
    assert c.OPT_IN_LABEL not in labels_of(template_of(out))


def test_a_skipped_workload_is_not_opted_in_by_its_label() -> None:
    mutation, out = run(job().label(c.OPT_IN_LABEL, c.OPT_IN_VALUE).label(c.SKIP, "true"))
    assert mutation.outcome is Outcome.SKIPPED
    assert c.OPT_IN_LABEL not in labels_of(template_of(out))
