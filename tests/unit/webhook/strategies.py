"""Hypothesis strategies for admission inputs: realistic objects with random JSON put anywhere.

Custom resources (MPIJob) reach a mutating webhook before schema validation, so wrong types in
``spec`` or ``metadata`` are real inputs, not only hypothetical ones.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from shared import constants as c
from shared.kinds import JOB, MPIJOB, POD, STATEFULSET
from tests.builders import job, mpijob, pod, statefulset

GVKS = [POD, JOB, STATEFULSET, MPIJOB]
# Keys that steer the mutation, so random trees reach its branches instead of missing them all.
KEYS = [
    "metadata",
    "labels",
    "annotations",
    "name",
    "generateName",
    "namespace",
    "spec",
    "template",
    "schedulingGates",
    "schedulerName",
    "nodeName",
    "workloadRef",
    "podGroup",
    "schedulingGroup",
    "podGroupName",
    "replicas",
    "parallelism",
    "completions",
    "activeDeadlineSeconds",
    "podManagementPolicy",
    "mpiReplicaSpecs",
    "Launcher",
    "Worker",
    "launcherCreationPolicy",
    "runPolicy",
    c.POD_GROUP_LABEL,
    c.COSCHEDULING_LABEL,
    c.COSCHEDULING_MIN_AVAILABLE_LABEL,
    c.ACS_LABEL,
    c.SCHEDULER_PLUGINS_LABEL,
    c.KAI_ANNOTATION,
    c.VOLCANO_ANNOTATION,
    c.SKIP,
    c.MIN_MEMBER_ANNOTATION,
    c.INFERRED_MIN_MEMBER_ANNOTATION,
    c.PLACEMENT_ANNOTATION,
]
STRINGS = st.sampled_from(["", "pg", "true", "3", "0", "-1", "volcano", "OrderedReady", "a/b~c", "x" * 70])
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | STRINGS
    | st.text(max_size=12)
)
keys = st.sampled_from(KEYS) | st.text(max_size=6)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=25,
)
valid_objects = st.sampled_from(
    [
        job().parallelism(4).active_deadline(30).scheduler("volcano"),
        job().template_label(c.COSCHEDULING_LABEL, "pg").gate("x/y"),
        statefulset().replicas(3),
        mpijob().workers(4).launcher_policy("WaitForWorkersReady"),
        pod().annotation(c.KAI_ANNOTATION, "pg"),
        pod().workload_ref("w", "g").scheduler("kai-scheduler"),
        pod().scheduling_group("pg"),
    ]
)


def set_path(doc: dict[str, Any], path: list[str], value: Any) -> None:
    for key in path[:-1]:
        child = doc.get(key)
        if not isinstance(child, dict):
            child = doc[key] = {}
        doc = child
    doc[path[-1]] = value


@st.composite
def corrupted_objects(draw: st.DrawFn) -> dict[str, Any]:
    """A realistic object with a few values anywhere replaced by random JSON."""
    doc: dict[str, Any] = draw(valid_objects).build()
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=7))
        set_path(doc, path, draw(json_values))
    return doc


objects = corrupted_objects() | st.dictionaries(keys, json_values, max_size=6)
