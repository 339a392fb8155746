"""Raw API objects to the core's records, and the pins written back."""

from __future__ import annotations

from typing import Any

from controller.api.records import pinned_node_terms, pod_record
from controller.core.fit import Constraints
from controller.core.model import Requirement

from ..core.builders import node


def raw_pod(terms: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    if terms is not None:
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        }
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u"}, "spec": spec}


def test_match_fields_are_read_as_node_fields() -> None:
    pod = pod_record(
        raw_pod([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}])
    )
    assert pod.required_affinity == ((Requirement("metadata.name", "In", ("node-a",), field=True),),)


def test_a_pod_without_affinity_is_pinned_with_one_term() -> None:
    assert pinned_node_terms(pod_record(raw_pod()), "node-a") == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}
    ]


def test_the_pin_is_added_to_every_term_and_changes_nothing_else() -> None:
    terms = [
        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100", "a100"]}]},
        {
            "matchExpressions": [{"key": "zone", "operator": "Exists"}],
            "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["bad"]}],
        },
    ]
    written = pinned_node_terms(pod_record(raw_pod(terms)), "node-a")
    pin = {"key": "metadata.name", "operator": "In", "values": ["node-a"]}
    # Only additions (the API server refuses any other change to a gated pod's node affinity).
    assert written == [
        {"matchExpressions": terms[0]["matchExpressions"], "matchFields": [pin]},
        {"matchExpressions": terms[1]["matchExpressions"], "matchFields": [*terms[1]["matchFields"], pin]},
    ]
    # Read back, the pinned pod fits exactly the pinned node (when its own terms allow it).
    pinned = pod_record(raw_pod(written))
    cons = Constraints.of(pinned)
    assert cons.allows(node("node-a").label("gpu", "h100").build())
    assert not cons.allows(node("node-b").label("gpu", "h100").build())
    assert not cons.allows(node("node-a").label("gpu", "t4").build())


def test_a_workloads_size_is_read_from_its_spec_unless_another_workload_made_it() -> None:
    from controller.api import resources
    from controller.api.records import WorkloadSize, workload_size_record

    job: dict[str, Any] = {"metadata": {"name": "train", "namespace": "ns"}, "spec": {"parallelism": 4}}
    assert workload_size_record(resources.JOBS, job) == WorkloadSize("Job", "ns", "train", 4, 4)
    # mpi-operator's launcher Job: its pods' gang is the MPIJob's, sized from the MPIJob.
    job["metadata"]["ownerReferences"] = [{"kind": "MPIJob", "name": "pi", "uid": "u", "controller": True}]
    assert workload_size_record(resources.JOBS, job) is None
