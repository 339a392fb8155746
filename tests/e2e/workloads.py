"""Builders for the manifests e2e tests apply, as a user would write them."""

from __future__ import annotations

from typing import Any

IMAGE = "registry.k8s.io/pause:3.10"
RUN_FOR = "kwok.phalanx.io/run-for"


def container(gpus: int = 1, cpu: str | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    if cpu:
        resources.setdefault("requests", {})["cpu"] = cpu
    return {"name": "main", "image": IMAGE, "resources": resources}


def pod_template(
    gpus: int = 1,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    run_for: str | None = None,
    restart_policy: str | None = "Never",
    **spec: Any,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"labels": dict(labels or {}), "annotations": dict(annotations or {})}
    if run_for:
        metadata["annotations"][RUN_FOR] = run_for
    body: dict[str, Any] = {"containers": [container(gpus)], "terminationGracePeriodSeconds": 0, **spec}
    if restart_policy:
        body["restartPolicy"] = restart_policy
    return {"metadata": metadata, "spec": body}


def job(
    name: str,
    parallelism: int,
    gpus: int = 1,
    completions: int | None = None,
    annotations: dict[str, str] | None = None,
    template_labels: dict[str, str] | None = None,
    template_annotations: dict[str, str] | None = None,
    run_for: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "annotations": dict(annotations or {})},
        "spec": {
            "parallelism": parallelism,
            "completions": completions if completions is not None else parallelism,
            "backoffLimit": 6,
            "template": pod_template(gpus, template_labels, template_annotations, run_for),
            **spec,
        },
    }


def statefulset(
    name: str, replicas: int, gpus: int = 1, labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    selector = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": selector},
            "template": pod_template(gpus, {**selector, **(labels or {})}, restart_policy=None),
            **spec,
        },
    }


def pod(
    name: str,
    gpus: int = 1,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    template = pod_template(gpus, labels, annotations, restart_policy=None, **spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **template["metadata"]},
        "spec": template["spec"],
    }


def mpijob(name: str, workers: int, gpus: int = 1, launcher_policy: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "slotsPerWorker": gpus,
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "template": pod_template(0, restart_policy=None)},
            "Worker": {"replicas": workers, "template": pod_template(gpus, restart_policy=None)},
        },
    }
    if launcher_policy:
        spec["launcherCreationPolicy"] = launcher_policy
    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": name}, "spec": spec}
