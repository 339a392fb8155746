"""Which object owns the gang of pods an operator made: the one the user applied."""

from __future__ import annotations

from controller.api.resources import JOBSETS, LEADERWORKERSETS, MPIJOBS, RAYCLUSTERS
from controller.api.workload_owners import named_object, owner_reference


def test_each_operator_names_its_object_on_its_pods() -> None:
    assert named_object({"jobset.sigs.k8s.io/jobset-name": "js"}) == (JOBSETS, "js")
    assert named_object({"leaderworkerset.sigs.k8s.io/name": "serve"}) == (LEADERWORKERSETS, "serve")
    assert named_object({"ray.io/cluster": "ray", "ray.io/node-type": "head"}) == (RAYCLUSTERS, "ray")
    mpi = {"training.kubeflow.org/job-name": "pi", "training.kubeflow.org/operator-name": "mpi-operator"}
    assert named_object(mpi) == (MPIJOBS, "pi")
    # training-operator's PyTorchJob uses the same job-name label: not an MPIJob.
    assert named_object({**mpi, "training.kubeflow.org/operator-name": "pytorchjob-controller"}) is None
    assert named_object({"app": "x"}) is None


def test_the_object_owns_the_gang_unless_a_trainjob_or_rayjob_made_it() -> None:
    jobset = {"metadata": {"name": "js", "uid": "u1"}}
    assert owner_reference(jobset, JOBSETS) == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "name": "js",
        "uid": "u1",
    }
    trainjob = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "t", "uid": "u0"}
    made = {"metadata": {"name": "t", "uid": "u1", "ownerReferences": [{**trainjob, "controller": True}]}}
    assert owner_reference(made, JOBSETS) == trainjob
    # An owner that is not a parent kind (a Deployment, say) does not take the gang.
    other = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "u9", "controller": True}
    assert owner_reference(
        {"metadata": {"name": "js", "uid": "u1", "ownerReferences": [other]}}, JOBSETS
    ) == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "name": "js",
        "uid": "u1",
    }
