"""Fluent builders for the manifests every test tier writes: Jobs, StatefulSets, MPIJobs and Pods.

    job("train").parallelism(4).gpus(1).node_selector(pool.selector).build()

Each builder starts from the smallest valid object (one container, no GPUs, pods that go away at
once) and each method changes one thing; ``build()`` returns a copy, so a builder can be reused.
On a workload, the pod-level methods (``gpus``, ``gate``, ``pod_spec``...) edit every pod template
it carries; on a Pod they edit the pod itself.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Self

from shared import constants as c
from shared.kinds import JOB, MPIJOB, POD, STATEFULSET
from shared.workloads import GVK
from tests.localcluster.stages import RUN_FOR_ANNOTATION

Obj = dict[str, Any]

IMAGE = "registry.k8s.io/pause:3.10"


def _sub(parent: Obj, *keys: str) -> Obj:
    for key in keys:
        parent = parent.setdefault(key, {})
    return parent


def _pod_spec(gpus: int = 0, restart_policy: str | None = None) -> Obj:
    container: Obj = {"name": "main", "image": IMAGE}
    if gpus:
        container["resources"] = {"limits": {c.GPU_RESOURCE: str(gpus)}}
    spec: Obj = {"containers": [container], "terminationGracePeriodSeconds": 0}
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


class Builder:
    """Common to every kind: object metadata, plus edits on the pod template(s) it carries."""

    gvk: GVK

    def __init__(self, name: str, api_version: str, kind: str) -> None:
        self.obj: Obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}
        if not name:
            self.obj["metadata"] = {"generateName": "gen-"}

    def _templates(self) -> list[Obj]:
        raise NotImplementedError

    # ---- the object's own metadata ----

    def namespace(self, namespace: str) -> Self:
        self.obj["metadata"]["namespace"] = namespace
        return self

    def uid(self, uid: str) -> Self:
        self.obj["metadata"]["uid"] = uid
        return self

    def label(self, key: str, value: str) -> Self:
        _sub(self.obj, "metadata", "labels")[key] = value
        return self

    def labels(self, labels: Mapping[str, str]) -> Self:
        _sub(self.obj, "metadata", "labels").update(labels)
        return self

    def annotation(self, key: str, value: str) -> Self:
        _sub(self.obj, "metadata", "annotations")[key] = value
        return self

    def annotations(self, annotations: Mapping[str, str]) -> Self:
        _sub(self.obj, "metadata", "annotations").update(annotations)
        return self

    def owner(self, ref: Mapping[str, str]) -> Self:
        """Owned (as its controller) by ``ref``: apiVersion, kind, name, uid."""
        self.obj["metadata"]["ownerReferences"] = [{**ref, "controller": True, "blockOwnerDeletion": True}]
        return self

    # ---- every pod template (on a Pod: the pod itself) ----

    def template_label(self, key: str, value: str) -> Self:
        for template in self._templates():
            _sub(template, "metadata", "labels")[key] = value
        return self

    def template_labels(self, labels: Mapping[str, str]) -> Self:
        for key, value in labels.items():
            self.template_label(key, value)
        return self

    def template_annotation(self, key: str, value: str) -> Self:
        for template in self._templates():
            _sub(template, "metadata", "annotations")[key] = value
        return self

    def run_for(self, duration: str) -> Self:
        """How long its pods run on the local cluster's fake nodes, e.g. "30s"."""
        return self.template_annotation(RUN_FOR_ANNOTATION, duration)

    def pod_spec(self, **fields: Any) -> Self:
        """Set pod-spec fields as they are spelt in the API (nodeSelector, priorityClassName...)."""
        for template in self._templates():
            template["spec"].update(copy.deepcopy(fields))
        return self

    def node_selector(self, selector: Mapping[str, str]) -> Self:
        return self.pod_spec(nodeSelector=dict(selector))

    def scheduler(self, name: str) -> Self:
        return self.pod_spec(schedulerName=name)

    def scheduling_group(self, pod_group: str) -> Self:
        """Its pods join the native PodGroup ``pod_group`` (``spec.schedulingGroup``, 1.36+)."""
        return self.pod_spec(schedulingGroup={"podGroupName": pod_group})

    def gate(self, name: str) -> Self:
        for template in self._templates():
            template["spec"].setdefault("schedulingGates", []).append({"name": name})
        return self

    def image(self, image: str) -> Self:
        for template in self._templates():
            template["spec"]["containers"][0]["image"] = image
        return self

    def gpus(self, count: int) -> Self:
        """``count`` GPUs per pod (limits; the apiserver copies them to requests); 0: none."""
        for template in self._templates():
            limits = _sub(template["spec"]["containers"][0], "resources", "limits")
            if count:
                limits[c.GPU_RESOURCE] = str(count)
            else:
                limits.pop(c.GPU_RESOURCE, None)
        return self

    def requests(self, **quantities: str) -> Self:
        """Container requests besides the GPUs, e.g. ``requests(cpu="1", memory="1Gi")``."""
        for template in self._templates():
            _sub(template["spec"]["containers"][0], "resources", "requests").update(quantities)
        return self

    def build(self) -> Obj:
        return copy.deepcopy(self.obj)


class JobBuilder(Builder):
    gvk = JOB

    def __init__(self, name: str) -> None:
        super().__init__(name, "batch/v1", "Job")
        self.obj["spec"] = {"template": {"spec": _pod_spec(restart_policy="Never")}}

    def _templates(self) -> list[Obj]:
        return [self.obj["spec"]["template"]]

    def parallelism(self, count: int) -> Self:
        """``count`` pods at once, and as many completions (``completions()`` to change that)."""
        self.obj["spec"]["parallelism"] = count
        self.obj["spec"]["completions"] = count
        return self

    def completions(self, count: int | None) -> Self:
        if count is None:
            self.obj["spec"].pop("completions", None)
        else:
            self.obj["spec"]["completions"] = count
        return self

    def suspend(self) -> Self:
        self.obj["spec"]["suspend"] = True
        return self

    def backoff_limit(self, count: int) -> Self:
        self.obj["spec"]["backoffLimit"] = count
        return self

    def active_deadline(self, seconds: int) -> Self:
        self.obj["spec"]["activeDeadlineSeconds"] = seconds
        return self

    def failure_policy(self, policy: Obj) -> Self:
        self.obj["spec"]["podFailurePolicy"] = policy
        return self

    def scheduling(self, config: Obj) -> Self:
        """``spec.scheduling``: the Job controller makes its Workload and PodGroup (WorkloadWithJob)."""
        self.obj["spec"]["scheduling"] = copy.deepcopy(config)
        return self


class StatefulSetBuilder(Builder):
    gvk = STATEFULSET

    def __init__(self, name: str) -> None:
        super().__init__(name, "apps/v1", "StatefulSet")
        self.obj["spec"] = {
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": _pod_spec()},
        }

    def _templates(self) -> list[Obj]:
        return [self.obj["spec"]["template"]]

    def replicas(self, count: int) -> Self:
        self.obj["spec"]["replicas"] = count
        return self

    def policy(self, policy: str) -> Self:
        self.obj["spec"]["podManagementPolicy"] = policy
        return self


class MPIJobBuilder(Builder):
    gvk = MPIJOB

    def __init__(self, name: str) -> None:
        super().__init__(name, "kubeflow.org/v2beta1", "MPIJob")
        self.obj["spec"] = {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": _pod_spec()}},
                "Worker": {"replicas": 2, "template": {"spec": _pod_spec(gpus=1)}},
            },
        }

    def _specs(self) -> Obj:
        specs: Obj = self.obj["spec"]["mpiReplicaSpecs"]
        return specs

    def _templates(self) -> list[Obj]:
        return [spec["template"] for spec in self._specs().values()]

    def launchers(self, count: int | None) -> Self:
        if count is None:
            self._specs()["Launcher"].pop("replicas", None)
        else:
            self._specs()["Launcher"]["replicas"] = count
        return self

    def workers(self, count: int | None) -> Self:
        if count is None:
            self._specs()["Worker"].pop("replicas", None)
        else:
            self._specs()["Worker"]["replicas"] = count
        return self

    def launcher_policy(self, policy: str) -> Self:
        self.obj["spec"]["launcherCreationPolicy"] = policy
        return self

    def worker_label(self, key: str, value: str) -> Self:
        _sub(self._specs()["Worker"]["template"], "metadata", "labels")[key] = value
        return self

    def run_policy_deadline(self, seconds: int) -> Self:
        self.obj["spec"]["runPolicy"] = {"activeDeadlineSeconds": seconds}
        return self


class PodBuilder(Builder):
    gvk = POD

    def __init__(self, name: str) -> None:
        super().__init__(name, "v1", "Pod")
        self.obj["spec"] = _pod_spec()

    # On a pod, the "template" is the pod itself.
    def _templates(self) -> list[Obj]:
        return [self.obj]

    def workload_ref(self, workload: str, pod_group: str, replica_key: str | None = None) -> Self:
        ref = {"name": workload, "podGroup": pod_group}
        if replica_key is not None:
            ref["podGroupReplicaKey"] = replica_key
        self.obj["spec"]["workloadRef"] = ref
        return self

    def node_name(self, node: str) -> Self:
        self.obj["spec"]["nodeName"] = node
        return self

    def phase(self, phase: str) -> Self:
        _sub(self.obj, "status")["phase"] = phase
        return self


def job(name: str = "train") -> JobBuilder:
    return JobBuilder(name)


def statefulset(name: str = "train") -> StatefulSetBuilder:
    return StatefulSetBuilder(name)


def mpijob(name: str = "train") -> MPIJobBuilder:
    return MPIJobBuilder(name)


def pod(name: str = "train-0") -> PodBuilder:
    return PodBuilder(name)


def podgroup(name: str, min_member: int) -> Obj:
    """A PodGroup as Coscheduling's tutorials write it (``scheduling.sigs.k8s.io``), sized ``min_member``."""
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member},
    }
