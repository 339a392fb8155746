"""A topology request the controller could never meet is refused at apply: Phalanx's and Kueue's
annotations that disagree, half a slice, a slice size that does not divide the gang. The ones that
agree (or come from one system) pass, and Phalanx's reach the pods."""

from __future__ import annotations

from shared import constants as c
from shared import topology
from tests.builders import job, mpijob
from webhook.mutate import Outcome

from .test_webhook_mutate import annotations_of, run, template_of

RACK = "topology.kubernetes.io/rack"
BLOCK = "topology.kubernetes.io/block"
CLIQUE = "nvidia.com/gpu.clique"


def test_phalanx_topology_annotations_reach_the_pods() -> None:
    builder = (
        job()
        .parallelism(8)
        .annotation(c.TOPOLOGY_PREFERRED_ANNOTATION, RACK)
        .annotation(c.TOPOLOGY_SLICE_REQUIRED_ANNOTATION, CLIQUE)
        .annotation(c.TOPOLOGY_SLICE_SIZE_ANNOTATION, "4")
        .annotation(c.TOPOLOGY_ANNOTATION, "gb200")
    )
    mutation, out = run(builder)
    assert mutation.outcome != Outcome.REJECTED, mutation
    annotations = annotations_of(template_of(out))
    assert annotations[c.TOPOLOGY_PREFERRED_ANNOTATION] == RACK
    assert annotations[c.TOPOLOGY_SLICE_REQUIRED_ANNOTATION] == CLIQUE
    assert annotations[c.TOPOLOGY_SLICE_SIZE_ANNOTATION] == "4"
    assert annotations[c.TOPOLOGY_ANNOTATION] == "gb200"


def test_a_kueue_tas_job_passes_unchanged_in_its_annotations() -> None:
    builder = (
        job()
        .parallelism(8)
        .template_annotation(topology.KUEUE_REQUIRED, BLOCK)
        .template_annotation(topology.KUEUE_SLICE_REQUIRED, CLIQUE)
        .template_annotation(topology.KUEUE_SLICE_SIZE, "4")
    )
    mutation, out = run(builder)
    assert mutation.outcome != Outcome.REJECTED, mutation
    assert annotations_of(template_of(out))[topology.KUEUE_REQUIRED] == BLOCK


def test_phalanx_and_kueue_disagreeing_is_refused() -> None:
    builder = (
        job()
        .parallelism(8)
        .annotation(c.TOPOLOGY_REQUIRED_ANNOTATION, RACK)
        .template_annotation(topology.KUEUE_REQUIRED, BLOCK)
    )
    mutation, _ = run(builder)
    assert mutation.outcome == Outcome.REJECTED
    assert f"required level {RACK!r} (Phalanx) and {BLOCK!r} (Kueue)" in (mutation.reason or "")


def test_phalanx_and_kueue_agreeing_pass() -> None:
    builder = (
        job()
        .parallelism(8)
        .annotation(c.TOPOLOGY_REQUIRED_ANNOTATION, RACK)
        .template_annotation(topology.KUEUE_REQUIRED, RACK)
    )
    assert run(builder)[0].outcome != Outcome.REJECTED


def test_a_slice_size_that_does_not_divide_the_gang_is_refused() -> None:
    builder = (
        job()
        .parallelism(6)
        .template_annotation(topology.KUEUE_SLICE_REQUIRED, CLIQUE)
        .template_annotation(topology.KUEUE_SLICE_SIZE, "4")
    )
    mutation, _ = run(builder)
    assert mutation.outcome == Outcome.REJECTED
    assert "slice size 4 does not divide the gang's 6 members" in (mutation.reason or "")


def test_half_a_slice_is_refused() -> None:
    mutation, _ = run(job().parallelism(8).annotation(c.TOPOLOGY_SLICE_SIZE_ANNOTATION, "4"))
    assert mutation.outcome == Outcome.REJECTED
    assert "without the other" in (mutation.reason or "")


def test_a_slice_size_that_is_no_number_is_refused() -> None:
    builder = (
        job()
        .parallelism(8)
        .annotation(c.TOPOLOGY_SLICE_REQUIRED_ANNOTATION, CLIQUE)
        .annotation(c.TOPOLOGY_SLICE_SIZE_ANNOTATION, "four")
    )
    mutation, _ = run(builder)
    assert mutation.outcome == Outcome.REJECTED
    assert "must be a positive integer" in (mutation.reason or "")


def test_templates_of_one_gang_asking_for_different_levels_are_refused() -> None:
    """An MPIJob's launcher and workers with different Kueue levels: the controller would have to
    pick one, so the workload is refused at apply, naming both templates."""
    builder = mpijob("m")
    specs = builder.obj["spec"]["mpiReplicaSpecs"]
    for role, level in (("Launcher", RACK), ("Worker", BLOCK)):
        specs[role]["template"].setdefault("metadata", {}).setdefault("annotations", {})[
            topology.KUEUE_REQUIRED
        ] = level
    mutation, _ = run(builder)
    assert mutation.outcome == Outcome.REJECTED, mutation
    reason = mutation.reason or ""
    assert f"asks for required level {RACK!r} and " in reason, reason
    assert f"for {BLOCK!r}; the templates of one gang must ask for the same topology" in reason, reason
    # A template that asks nothing agrees with one that does.
    specs["Launcher"]["template"]["metadata"]["annotations"].pop(topology.KUEUE_REQUIRED)
    assert run(builder)[0].outcome != Outcome.REJECTED


def test_kueue_values_that_are_no_level_or_no_number_are_refused() -> None:
    """Kueue's annotations are checked as Phalanx's are: refused at apply, not InvalidSpec later."""
    for key, value, said in (
        (topology.KUEUE_REQUIRED, "not a key!", "required level 'not a key!', which is not a node label key"),
        (topology.KUEUE_SLICE_SIZE, "four", "slice size 'four', which is not a positive integer"),
        (topology.KUEUE_SLICE_SIZE, "４", "slice size '４', which is not a positive integer"),
    ):
        builder = job().parallelism(8).template_annotation(key, value)
        if key == topology.KUEUE_SLICE_SIZE:
            builder = builder.template_annotation(topology.KUEUE_SLICE_REQUIRED, CLIQUE)
        mutation, _ = run(builder)
        assert mutation.outcome == Outcome.REJECTED, (value, mutation)
        assert said in (mutation.reason or ""), mutation.reason


def test_slices_must_divide_the_min_member_override_not_the_template_size() -> None:
    builder = (
        job()
        .parallelism(8)
        .annotation(c.MIN_MEMBER_ANNOTATION, "6")
        .template_annotation(topology.KUEUE_SLICE_REQUIRED, CLIQUE)
        .template_annotation(topology.KUEUE_SLICE_SIZE, "4")
    )
    mutation, _ = run(builder)
    assert mutation.outcome == Outcome.REJECTED, mutation
    assert "slice size 4 does not divide the gang's 6 members" in (mutation.reason or "")
