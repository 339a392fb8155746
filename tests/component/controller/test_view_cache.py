"""Gang views reused between passes are the views a fresh pass would build.

The reconciler keeps each gang's view while the records it was built from stay the same objects
(``controller.pipeline.gangs.ViewCache``). Each case changes one input a view reads and checks that
the gang changed and that the cached pass sees exactly what an uncached one does: a change the
cache missed would leave a gang planned from stale facts.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from controller.api import resources as r
from controller.api.admission_record import AdmissionRecord
from controller.core import Gang, GangKey
from controller.pipeline import gangs
from shared import constants as c
from tests.component.controller.harness import JOB, KEY, NS, Harness, bind, gang, podgroup

Change = Callable[[Harness], None]


async def running(h: Harness) -> None:
    """Gang ``g`` admitted and running; gang ``w`` (2 of 3 members) waiting for its last member."""
    pg = podgroup(min_member=2)
    pg["spec"]["priorityClassName"] = "team-high"
    h.kube.seed(r.PODGROUPS, pg, podgroup("w", min_member=3))
    h.kube.seed(r.PODS, *gang(2, min_member=2), *gang(2, group="w", min_member=3))
    await h.step()
    await h.step()
    for i in range(2):
        bind(h.kube, f"g-{i}", str(h.pin(f"g-{i}")), phase="Running")
    await h.step()


def gangs_of(h: Harness, cached: bool) -> dict[GangKey, Gang]:
    cache = h.reconciler.views if cached else None
    _, views = gangs.snapshot(h.store, h.clock(), skip_settled=True, cache=cache)
    return {key: view.gang for key, view in views.items()}


def priority_class(h: Harness) -> None:
    h.store.upsert_priority_class({"metadata": {"name": "team-high"}, "value": 7})


def workload_scaled(h: Harness) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": JOB["name"], "namespace": NS}}
    h.store.upsert_workload_size(r.JOBS, {**job, "spec": {"parallelism": 6, "completions": 6}})


def budget(h: Harness) -> None:
    selector = {"matchLabels": {c.POD_GROUP_LABEL: "g"}}
    h.store.upsert_budget(
        {"metadata": {"name": "keep", "namespace": NS}, "spec": {"selector": selector}, "status": {}}
    )


def admission_assumed(h: Harness) -> None:
    uid = str(h.kube.obj(r.PODS, NS, "w-0")["metadata"]["uid"])  # type: ignore[index]
    h.store.assume_admission(GangKey(NS, "w"), AdmissionRecord(h.clock(), {uid: "node-1"}, {uid: "node-1"}))


def hold(h: Harness) -> None:
    uid = str(h.kube.obj(r.PODS, NS, "w-0")["metadata"]["uid"])  # type: ignore[index]
    h.store.hold(GangKey(NS, "w"), {uid: "node-1"}, h.clock())


def namespace_queue(h: Harness) -> None:
    h.store.upsert_namespace_queues({"metadata": {"name": NS, "labels": {c.QUEUE_LABEL: "research"}}})


def member_changed(h: Harness) -> None:
    h.kube.mutate(
        r.PODS, NS, "w-1", lambda p: p["metadata"]["annotations"].update({c.PLACEMENT_ANNOTATION: "free"})
    )
    h.sync()


def podgroup_changed(h: Harness) -> None:
    h.kube.mutate(r.PODGROUPS, NS, "w", lambda pg: pg["spec"].update({"minMember": 2}))
    h.sync()


@pytest.mark.parametrize(
    "change",
    [
        priority_class,
        workload_scaled,
        budget,
        admission_assumed,
        hold,
        namespace_queue,
        member_changed,
        podgroup_changed,
    ],
)
async def test_a_cached_pass_sees_every_change_a_fresh_pass_sees(h: Harness, change: Change) -> None:
    await running(h)
    before = gangs_of(h, cached=True)
    assert before == gangs_of(h, cached=False)
    change(h)
    after = gangs_of(h, cached=True)
    assert after != before, "the change must reach some gang"
    assert after == gangs_of(h, cached=False)


async def test_a_steady_gang_is_not_built_again(h: Harness) -> None:
    await running(h)
    gangs_of(h, cached=True)
    hits = h.reconciler.views.hits
    first = gangs_of(h, cached=True)[KEY]
    assert h.reconciler.views.hits == hits + 2  # both gangs reused
    assert gangs_of(h, cached=True)[KEY] is first


async def test_a_wait_that_begins_now_is_dated_by_each_pass(h: Harness) -> None:
    """A gang that just lost its admission (no live member yet) starts a new wait "now": that view
    reads the clock, so it is never reused with an old time."""
    await running(h)
    for i in range(2):
        h.kube.remove(r.PODS, NS, f"g-{i}")
    h.sync()
    first = gangs_of(h, cached=True)[KEY].waiting_since
    h.clock.advance(5)
    assert gangs_of(h, cached=True)[KEY].waiting_since == first + 5  # type: ignore[operator]
