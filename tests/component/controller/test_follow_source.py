"""A PodGroup Phalanx made follows its source on every pass where that source may have changed --
and only then (following is linear in the gang's members, and a pass covers every gang). These
tests change one source at a time while the PodGroup itself stays the same object, so a change the
controller failed to notice would leave the PodGroup's size behind."""

from __future__ import annotations

from controller.api import resources as r
from shared import constants as c
from tests import builders
from tests.component.controller.harness import JOB, NS, Harness, gang, pod


def min_member(h: Harness) -> int:
    pg = h.pg()
    assert pg is not None
    return int(pg["spec"]["minMember"])


async def settled(h: Harness) -> None:
    """Passes until nothing more is written: the PodGroup record stays the same object."""
    for _ in range(3):
        mark = h.mark()
        await h.step()
        if not h.writes_since(mark):
            return
    raise AssertionError("the controller keeps writing")


async def test_a_workload_scaled_while_nothing_else_changes_is_followed() -> None:
    h = Harness()
    h.cluster(nodes=1, gpus=4)
    h.kube.seed(r.JOBS, builders.job(JOB["name"]).namespace(NS).uid(JOB["uid"]).parallelism(10).build())
    h.kube.seed(r.PODS, *gang(10))  # never fits: it waits
    await settled(h)
    assert min_member(h) == 10

    def scale(obj: dict[str, object]) -> None:
        obj["spec"] = {"parallelism": 12, "completions": 12}

    h.kube.mutate(r.JOBS, NS, "train", scale)
    await h.step()
    assert min_member(h) == 12


async def test_a_new_member_that_declares_a_larger_gang_is_followed() -> None:
    h = Harness()
    h.cluster(nodes=1, gpus=4)
    h.kube.seed(r.PODS, *gang(2, owner=None, min_member=None, annotations={c.MIN_MEMBER_ANNOTATION: "3"}))
    await settled(h)
    assert min_member(h) == 3

    larger = {c.MIN_MEMBER_ANNOTATION: "6"}
    h.kube.seed(r.PODS, pod("g-2", owner=None, min_member=None, annotations=larger))
    await h.step()
    assert min_member(h) == 6
