"""A gang whose failed members leave too few to make it up says so: MembersFailed."""

from __future__ import annotations

import pytest

from controller.api import resources as r
from tests.component.controller.harness import Harness, bind, gang, podgroup


async def run_gang(h: Harness, n: int) -> None:
    """Bare pods (nobody recreates them) of one PodGroup of ``n``, admitted and running."""
    h.kube.seed(r.PODGROUPS, podgroup(min_member=n))
    h.kube.seed(r.PODS, *gang(n, owner=None))
    await h.step()
    await h.step()
    for i in range(n):
        bind(h.kube, f"g-{i}", str(h.pin(f"g-{i}")), phase="Running")
    await h.step()


@pytest.mark.parametrize(("size", "failed"), [(2, 1), (2, 2), (3, 2)])
async def test_too_many_failed_members_fail_the_gang(h: Harness, size: int, failed: int) -> None:
    await run_gang(h, size)
    for i in range(failed):
        bind(h.kube, f"g-{i}", str(h.pin(f"g-{i}")), phase="Failed")
    await h.step()
    status = (h.pg() or {})["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "MembersFailed"), status
    assert status["message"] == f"{failed} members failed"


async def test_a_failed_member_with_a_replacement_waiting_is_not_a_failed_gang(h: Harness) -> None:
    await run_gang(h, 2)
    bind(h.kube, "g-0", str(h.pin("g-0")), phase="Failed")
    h.kube.seed(r.PODS, gang(3, owner=None)[2])  # its owner made a new member: gated, admitted next
    await h.step()
    status = (h.pg() or {})["status"]
    assert status["reason"] != "MembersFailed", status


async def test_a_failed_member_its_workload_replaces_leaves_the_gang_degraded_not_failed(h: Harness) -> None:
    """A Job recreates a failed member, after its own back-off: meanwhile the gang runs below its
    size, which is Degraded; it never says Failed and then Running again."""
    h.kube.seed(r.PODGROUPS, podgroup(min_member=3))
    h.kube.seed(r.PODS, *gang(3))  # owned by a Job
    await h.step()
    await h.step()
    for i in range(3):
        bind(h.kube, f"g-{i}", str(h.pin(f"g-{i}")), phase="Running")
    await h.step()
    bind(h.kube, "g-0", str(h.pin("g-0")), phase="Failed")
    await h.step()
    status = (h.pg() or {})["status"]
    assert (status["phase"], status["reason"]) == ("Running", "Degraded"), status

    h.kube.seed(r.PODS, gang(4)[3])  # the Job's replacement: gated, admitted into the gang
    await h.step()
    status = (h.pg() or {})["status"]
    assert status["phase"] != "Failed" and status["reason"] != "MembersFailed", status


async def test_every_member_of_a_workload_failed_fails_the_gang(h: Harness) -> None:
    h.kube.seed(r.PODGROUPS, podgroup(min_member=2))
    h.kube.seed(r.PODS, *gang(2))
    await h.step()
    await h.step()
    for i in range(2):
        bind(h.kube, f"g-{i}", str(h.pin(f"g-{i}")), phase="Failed")
    await h.step()
    status = (h.pg() or {})["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "MembersFailed"), status
