"""The manifests the tests write, built one way for every tier (unit, component, e2e, bench, demo)."""

from tests.builders.workloads import (
    IMAGE,
    Builder,
    JobBuilder,
    MPIJobBuilder,
    PodBuilder,
    StatefulSetBuilder,
    job,
    mpijob,
    pod,
    podgroup,
    statefulset,
)

__all__ = [
    "IMAGE",
    "Builder",
    "JobBuilder",
    "MPIJobBuilder",
    "PodBuilder",
    "StatefulSetBuilder",
    "job",
    "mpijob",
    "pod",
    "podgroup",
    "statefulset",
]
