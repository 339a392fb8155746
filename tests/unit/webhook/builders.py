"""Fluent builders for the objects the webhook admits, and a tiny RFC 6902 applier to check patches."""

from __future__ import annotations

import copy
from typing import Any, Self

import jsonpatch  # type: ignore[import-untyped]
import jsonpointer  # type: ignore[import-untyped]

from shared.kinds import JOB, MPIJOB, POD, STATEFULSET
from shared.workloads import GVK

Obj = dict[str, Any]


def _sub(parent: Obj, *keys: str) -> Obj:
    for key in keys:
        parent = parent.setdefault(key, {})
    return parent


def _pod_spec(gpus: int = 0) -> Obj:
    container: Obj = {
        "name": "main",
        "image": "registry.example/train:1.0",
        "command": ["python", "train.py"],
    }
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {"restartPolicy": "Never", "containers": [container]}


class Builder:
    """Common to every kind: object metadata, plus edits on the pod template(s) it carries."""

    gvk: GVK

    def __init__(self, name: str, api_version: str, kind: str) -> None:
        self.obj: Obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": name}}
        if not name:
            self.obj["metadata"] = {"generateName": "gen-"}

    def _templates(self) -> list[Obj]:
        raise NotImplementedError

    def label(self, key: str, value: str) -> Self:
        _sub(self.obj, "metadata", "labels")[key] = value
        return self

    def annotation(self, key: str, value: str) -> Self:
        _sub(self.obj, "metadata", "annotations")[key] = value
        return self

    def template_label(self, key: str, value: str) -> Self:
        for template in self._templates():
            _sub(template, "metadata", "labels")[key] = value
        return self

    def template_annotation(self, key: str, value: str) -> Self:
        for template in self._templates():
            _sub(template, "metadata", "annotations")[key] = value
        return self

    def scheduler(self, name: str) -> Self:
        for template in self._templates():
            template["spec"]["schedulerName"] = name
        return self

    def gate(self, name: str) -> Self:
        for template in self._templates():
            template["spec"].setdefault("schedulingGates", []).append({"name": name})
        return self

    def gpus(self, count: int) -> Self:
        for template in self._templates():
            template["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(count)}}
        return self

    def build(self) -> Obj:
        return copy.deepcopy(self.obj)


class JobBuilder(Builder):
    gvk = JOB

    def __init__(self, name: str) -> None:
        super().__init__(name, "batch/v1", "Job")
        self.obj["spec"] = {"template": {"spec": _pod_spec()}}

    def _templates(self) -> list[Obj]:
        return [self.obj["spec"]["template"]]

    def parallelism(self, count: int) -> Self:
        self.obj["spec"]["parallelism"] = count
        return self

    def completions(self, count: int) -> Self:
        self.obj["spec"]["completions"] = count
        return self

    def active_deadline(self, seconds: int) -> Self:
        self.obj["spec"]["activeDeadlineSeconds"] = seconds
        return self

    def failure_policy(self, policy: Obj) -> Self:
        self.obj["spec"]["podFailurePolicy"] = policy
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

    def _templates(self) -> list[Obj]:
        return [self.obj]

    # On a pod, the "template" is the pod itself.
    def workload_ref(self, workload: str, pod_group: str, replica_key: str | None = None) -> Self:
        ref = {"name": workload, "podGroup": pod_group}
        if replica_key is not None:
            ref["podGroupReplicaKey"] = replica_key
        self.obj["spec"]["workloadRef"] = ref
        return self

    def scheduling_group(self, pod_group: str) -> Self:
        self.obj["spec"]["schedulingGroup"] = {"podGroupName": pod_group}
        return self

    def node_name(self, node: str) -> Self:
        self.obj["spec"]["nodeName"] = node
        return self


def job(name: str = "train") -> JobBuilder:
    return JobBuilder(name)


def statefulset(name: str = "train") -> StatefulSetBuilder:
    return StatefulSetBuilder(name)


def mpijob(name: str = "train") -> MPIJobBuilder:
    return MPIJobBuilder(name)


def pod(name: str = "train-0") -> PodBuilder:
    return PodBuilder(name)


def request(
    obj: Obj | Builder,
    *,
    operation: str = "CREATE",
    namespace: str = "ml",
    gvk: GVK | None = None,
    uid: str = "6a1d4b8e-0000-4000-8000-000000000001",
) -> Obj:
    """An AdmissionRequest (the ``request`` member of an AdmissionReview) for ``obj``."""
    if isinstance(obj, Builder):
        gvk = gvk or obj.gvk
        obj = obj.build()
    group, version, kind = gvk or POD
    return {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "operation": operation,
        "namespace": namespace,
        "object": obj,
        "userInfo": {"username": "alice"},
    }


def review(req: Obj) -> Obj:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


class PatchError(Exception):
    pass


def apply_patch(doc: Any, ops: list[Obj]) -> Any:
    """Apply the webhook's add/replace ops with an independent RFC 6902 implementation (the
    ``jsonpatch`` library), so the oracle is not written by the hands that wrote the patcher."""
    for op in ops:
        if op["op"] not in ("add", "replace"):
            raise PatchError(f"unsupported op {op}")
    try:
        return jsonpatch.apply_patch(doc, ops, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as err:
        raise PatchError(str(err)) from err
